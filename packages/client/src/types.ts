/**
 * Wire shapes of the service (docs/api.md#operations), member names as on the wire. Each is the
 * TypeScript form of the JSON schema the service validates or serialises that body with; a test
 * of the Latchkey repository (test/clients/client-contract.ts) fails to type-check when one
 * differs from the service's schema, either way.
 */

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

/** docs/api.md#sign-up, 201; docs/api.md#confirm-an-email-change, 200. */
export interface UserResponse {
  user: User;
}

/** docs/api.md#verify-email-post. */
export interface VerifyEmailRequest {
  email: string;
  code: string;
}

/** docs/api.md#resend-verification; docs/api.md#request-a-password-reset. */
export interface EmailRequest {
  email: string;
}

/** docs/api.md#confirm-a-password-reset. */
export interface ConfirmPasswordResetRequest {
  email: string;
  code: string;
  new_password: string;
}

/** docs/api.md#change-password. */
export interface ChangePasswordRequest {
  current_password: string;
  new_password: string;
}

/** docs/api.md#set-a-password: the first password of a user who signed up through a provider. */
export interface SetPasswordRequest {
  new_password: string;
}

/** docs/api.md#change-email: a user without a password leaves `password` out (a recent sign-in instead). */
export interface ChangeEmailRequest {
  new_email: string;
  password?: string;
}

/** docs/api.md#confirm-an-email-change: the emailed code. */
export interface CodeRequest {
  code: string;
}

/**
 * docs/api.md#delete-account and docs/api.md#set-up-totp: the password, left out by a user who
 * has none (a recent sign-in instead).
 */
export interface PasswordRequest {
  password?: string;
}

/** docs/api.md#disable-totp, docs/api.md#regenerate-recovery-codes: the password (left out by a user who has none) and a TOTP code or a recovery code. */
export interface PasswordAndCodeRequest {
  password?: string;
  code: string;
}

/** docs/api.md#sign-in-second-step: a TOTP code (6 digits) or one recovery code, not both. */
export type MfaVerifyRequest = { code: string } | { recovery_code: string };

/** docs/api.md#set-up-totp, 200: the secret and its `otpauth://` URI, shown once. */
export interface MfaSetUpResponse {
  secret: string;
  otpauth_uri: string;
}

/** docs/api.md#enable-totp, docs/api.md#regenerate-recovery-codes, 200: 10 recovery codes, shown once. */
export interface RecoveryCodesResponse {
  recovery_codes: string[];
}

/** docs/api.md#list-sessions, 200. */
export interface SessionsResponse {
  sessions: Session[];
}

/** docs/api.md#register-a-passkey, 201; docs/api.md#rename-a-passkey, 200. */
export interface PasskeyResponse {
  passkey: Passkey;
}

/** docs/api.md#list-passkeys, 200: oldest first. */
export interface PasskeysResponse {
  passkeys: Passkey[];
}

/** docs/api.md#list-identity-providers, 200. */
export interface ProvidersResponse {
  providers: Provider[];
}

/** docs/api.md#list-identities, 200. */
export interface IdentitiesResponse {
  identities: Identity[];
}

/** docs/api.md#link-an-identity-provider, 200: where the browser goes next. */
export interface LinkResponse {
  authorization_url: string;
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

/** docs/api.md#jwks, 200: RFC 7517 public keys, RSA (RS256) signing keys. */
export interface JwksResponse {
  keys: Array<{ kty: string; kid: string; use: string; alg: string; n: string; e: string }>;
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
