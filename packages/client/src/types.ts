/** Wire shapes of the service (docs/api.md#operations), member names as on the wire. */

/** docs/api.md#operations, "The User object". */
export interface User {
  id: string;
  username: string;
  email: string | null;
  phone: string | null;
  is_email_verified: boolean;
  is_phone_verified: boolean;
}

/** docs/api.md#list-sessions, "The Session object". Timestamps are ISO 8601 strings. */
export interface Session {
  id: string;
  device_id: string | null;
  ip: string | null;
  user_agent: string | null;
  created_at: string;
  last_used_at: string | null;
  expires_at: string;
  current: boolean;
}

/** docs/api.md#sign-up: `username` and `password`, and an `email` or a `phone` (or both). */
export interface SignUpRequest {
  username: string;
  email?: string;
  phone?: string;
  password: string;
}

/** docs/api.md#sign-in: at least one identifier; several must name the same user. */
export interface SignInRequest {
  username?: string;
  email?: string;
  phone?: string;
  password: string;
}

/** docs/api.md#sign-in, 200. */
export interface SignInResponse {
  user: User;
  session_id: string;
  tokens: { access_token: string };
}

/** docs/api.md#refresh, 200. */
export interface RefreshResponse {
  session_id: string;
  tokens: { access_token: string };
}

/** docs/api.md#me, 200. */
export interface MeResponse {
  user: User;
  session_id: string;
}

/**
 * docs/api.md#register-a-passkey, "The Passkey object": one WebAuthn credential of the user (W3C
 * WebAuthn Level 3). `name` is the user's label (at most 64 characters) or null; timestamps are
 * ISO 8601 strings, `last_used_at` null until its first sign-in.
 */
export interface Passkey {
  id: string;
  name: string | null;
  created_at: string;
  last_used_at: string | null;
}

/** docs/api.md#list-identity-providers: a configured identity provider, for a sign-in button. */
export interface Provider {
  id: string;
  name: string;
}

/**
 * docs/api.md#sign-in-with-an-identity-provider, "The Identity object": one account at an
 * identity provider linked to the user. `email` is the provider's verified address or null;
 * timestamps are ISO 8601 strings, `last_sign_in_at` null until it signs in.
 */
export interface Identity {
  id: string;
  provider: string;
  email: string | null;
  created_at: string;
  last_sign_in_at: string | null;
}

/** docs/api.md#jwks, 200: RFC 7517 public keys. */
export interface JwksResponse {
  keys: Array<Record<string, unknown> & { kid: string; kty: string }>;
}

/** Events of a client and what their listeners get. */
export interface ClientEvents {
  /** A session began in this tab or another one: sign-in, or restored through the cookie. */
  signedIn: { sessionId: string };
  /** The session ended for this tab (in every tab): logout, revocation, a refresh answered 401. `reason` is the code (`logout`, or the service's code). */
  signedOut: { reason: string };
  /** A new access token arrived (refreshed here or in another tab). */
  tokenRefreshed: { sessionId: string };
}
