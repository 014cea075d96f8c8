import type { UserRow } from '../users/users.shared.js';

/** A sign-in or refresh result: what the route answers plus the refresh token for the cookie. */
export interface IssuedTokens {
  readonly user?: UserRow;
  readonly sessionId: string;
  readonly accessToken: string;
  readonly refreshToken: string;
  /** Seconds until the session (and so the refresh token and cookie) expires. */
  readonly refreshMaxAgeSeconds: number;
}
