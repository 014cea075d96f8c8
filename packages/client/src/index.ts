/**
 * @latchkey/client: the browser side of Latchkey. One typed function per operation of the
 * service (docs/api.md#operations), grouped as the service groups them: the core (sign-up,
 * sign-in, logout, refresh, me, the account) on the client, the second factor on `client.mfa`,
 * sessions on `client.sessions`, passkeys on `client.passkeys`. The access token in memory only,
 * `client.fetch` for the app's own APIs, and refresh coordinated across the origin's tabs
 * (token-keeper.ts). The
 * passkey ceremonies (passkeys.ts, with @simplewebauthn/browser) are imported on first use.
 */
import type { PublicKeyCredentialCreationOptionsJSON, PublicKeyCredentialRequestOptionsJSON } from '@simplewebauthn/browser';
import { errorOf, LatchkeyError, networkError } from './errors.js';
import { stateOf, TokenKeeper } from './token-keeper.js';
import type {
  ChangeEmailRequest,
  ChangePasswordRequest,
  ClientEvents,
  CodeRequest,
  ConfirmPasswordResetRequest,
  EmailRequest,
  IdentitiesResponse,
  LinkResponse,
  JwksResponse,
  MeResponse,
  MfaSetUpResponse,
  MfaVerifyRequest,
  PasskeyResponse,
  PasskeysResponse,
  PasswordAndCodeRequest,
  PasswordRequest,
  ProvidersResponse,
  RecoveryCodesResponse,
  SessionsResponse,
  SetPasswordRequest,
  SignInRequest,
  SignInResponse,
  SignUpRequest,
  UserResponse,
  VerifyEmailRequest,
} from './types.js';

export { LatchkeyError } from './errors.js';
export type * from './types.js';

export interface ClientOptions {
  /**
   * Where the service is reachable, without the `/auth/v0` prefix (docs/api.md#base-path-and-version):
   * `https://auth.example.com`, or `''` when it is routed under `/auth/v0` of the page's origin.
   * Another origin must be listed in the service's `CORS_ORIGINS` (docs/api.md#cors).
   */
  baseUrl: string;
  /** Restore the session through the refresh cookie when created, as on a page load (default true). */
  restore?: boolean;
  /** The fetch to use (default: the page's). */
  fetch?: typeof fetch;
  /**
   * Origins besides the page's own that `client.fetch` may send the access token to, such as
   * `https://api.example.com`. To any other origin it sends the request without it: a bearer
   * token is usable by whoever receives it (RFC 6750 §5.3).
   */
  apiOrigins?: string[];
}

export interface LatchkeyClient {
  /** Settles when the session restore of a page load is over: true when signed in. Never rejects. */
  readonly ready: Promise<boolean>;
  /** Whether this tab holds a session's access token. */
  readonly signedIn: boolean;
  /** The session id (`sid`), or null when signed out. */
  readonly sessionId: string | null;
  /** A valid access token (refreshed first if about to expire), or null when signed out. For APIs `fetch` does not reach (WebSocket, EventSource). */
  accessToken(): Promise<string | null>;
  /**
   * `fetch` with `Authorization: Bearer <access token>` for the app's own APIs: the page's origin
   * and `apiOrigins` (to other origins the request goes without the token). On a 401 with
   * the code `auth.invalid_access_token` (what @latchkey/verify answers) it refreshes once and
   * sends the request again; the body must then be re-readable (not a stream). Never throws for
   * an HTTP status; throws the refresh's LatchkeyError when no token can be had.
   */
  fetch(input: RequestInfo | URL, init?: RequestInit): Promise<Response>;
  /** Listens to an event; returns the function that stops listening. */
  on<K extends keyof ClientEvents>(event: K, listener: (payload: ClientEvents[K]) => void): () => void;
  /** Refreshes now (coordinated like every refresh); false when the session is over. */
  refresh(): Promise<boolean>;
  /** docs/api.md#sign-up (201). */
  signUp(body: SignUpRequest): Promise<UserResponse>;
  /** docs/api.md#verify-email-post (204). */
  verifyEmail(body: VerifyEmailRequest): Promise<void>;
  /** docs/api.md#resend-verification (204). */
  resendVerification(body: EmailRequest): Promise<void>;
  /**
   * docs/api.md#sign-in (200): keeps the access token, stores the cookie, and signs in every tab.
   * A user with two-step sign-in on gets `auth.mfa_required` (403): complete it with `mfa.verify`.
   */
  signIn(body: SignInRequest): Promise<SignInResponse>;
  /** docs/api.md#logout (204): ends the session and signs out every tab. A 401 (the session had already ended) signs out too, and is thrown. */
  logout(): Promise<void>;
  /** docs/api.md#me (200). */
  me(): Promise<MeResponse>;
  /** docs/api.md#change-password (204): every session ends, so every tab is signed out. */
  changePassword(body: ChangePasswordRequest): Promise<void>;
  /**
   * docs/api.md#change-email (204): a code is emailed to `new_email`; nothing changes until it is
   * confirmed. A user without a password leaves `password` out (a recent sign-in instead).
   */
  changeEmail(body: ChangeEmailRequest): Promise<void>;
  /** docs/api.md#confirm-an-email-change (200): the account has the new address; sessions go on. */
  confirmEmailChange(body: CodeRequest): Promise<UserResponse>;
  /** docs/api.md#delete-account (204): every tab is signed out. A user without a password leaves `password` out. */
  deleteAccount(body: PasswordRequest): Promise<void>;
  /** docs/api.md#request-a-password-reset (204). */
  requestPasswordReset(body: EmailRequest): Promise<void>;
  /** docs/api.md#confirm-a-password-reset (204). */
  confirmPasswordReset(body: ConfirmPasswordResetRequest): Promise<void>;
  /** The second factor, TOTP with recovery codes (docs/api.md#second-factor). */
  readonly mfa: MfaApi;
  /** The signed-in user's sessions (docs/api.md#sessions). */
  readonly sessions: SessionsApi;
  /** Passkeys (WebAuthn): registering and managing them, and signing in with one (docs/api.md#passkeys). */
  readonly passkeys: PasskeysApi;
  /** docs/api.md#list-identity-providers (200): the configured providers, for sign-in buttons. */
  providers(): Promise<ProvidersResponse>;
  /**
   * docs/api.md#authorize: sends the browser to the provider (a navigation: the page unloads).
   * It comes back to `redirectTo` (one of the service's OAUTH_REDIRECT_URLS; default: the first),
   * signed in (a client created there restores the session), or with `?error=<code>`: read it
   * with {@link readProviderError}.
   */
  signInWithProvider(providerId: string, options?: { redirectTo?: string }): void;
  /**
   * The `error` a provider's flow returned to this page with (docs/api.md#callback-errors), or
   * null; removes it from the address bar (history.replaceState). `auth.mfa_required`: the
   * challenge cookie is set, complete with `mfa.verify`.
   */
  readProviderError(): string | null;
  /**
   * docs/api.md#link-an-identity-provider: asks the service for a link flow (a recent sign-in is
   * needed: `auth.reauthentication_required`, 401, otherwise), then sends the browser to the
   * provider; it comes back to `redirectTo`, with `?error=` on failure.
   */
  linkProvider(providerId: string, options?: { redirectTo?: string }): Promise<void>;
  /** docs/api.md#list-identities (200): the signed-in user's identities, oldest first. */
  identities(): Promise<IdentitiesResponse>;
  /** docs/api.md#unlink-an-identity (204); `auth.identities.last_sign_in_method` (409) for the last way in. */
  unlinkIdentity(identityId: string): Promise<void>;
  /** docs/api.md#set-a-password (204): the first password of a user who has none; sessions go on. */
  setPassword(body: SetPasswordRequest): Promise<void>;
  /** docs/api.md#jwks (200). */
  jwks(): Promise<JwksResponse>;
  /** Stops timers and listeners and forgets the token (the session itself goes on). */
  close(): void;
}

/** `client.mfa`: the second factor, TOTP (RFC 6238) with recovery codes (docs/api.md#second-factor). */
export interface MfaApi {
  /**
   * docs/api.md#sign-in-second-step (200): completes a sign-in that threw `auth.mfa_required`
   * (the browser holds the challenge cookie, 300 s, for `signIn` and for a provider's sign-in)
   * with a TOTP `code` or a `recovery_code`; then as `signIn`: keeps the access token, stores the
   * cookie, and signs in every tab. A wrong code throws `auth.mfa.invalid_code` (401).
   */
  verify(body: MfaVerifyRequest): Promise<SignInResponse>;
  /**
   * docs/api.md#set-up-totp (200): a new secret and its `otpauth://` URI (for a QR code), shown
   * once; two-step sign-in is not on until `enable` confirms a code. A user without a password
   * leaves `password` out (a recent sign-in instead).
   */
  setUp(body: PasswordRequest): Promise<MfaSetUpResponse>;
  /** docs/api.md#enable-totp (200): confirms a code of the set-up secret; two-step sign-in is on. Resolves to the 10 recovery codes, shown once. */
  enable(body: CodeRequest): Promise<RecoveryCodesResponse>;
  /** docs/api.md#disable-totp (204): two-step sign-in is off; `code` is a TOTP code or a recovery code. */
  disable(body: PasswordAndCodeRequest): Promise<void>;
  /** docs/api.md#regenerate-recovery-codes (200): 10 new recovery codes; the old ones stop working. `code` is a TOTP code or a recovery code. */
  regenerateRecoveryCodes(body: PasswordAndCodeRequest): Promise<RecoveryCodesResponse>;
}

/** `client.sessions`: the signed-in user's sessions (docs/api.md#sessions). */
export interface SessionsApi {
  /** docs/api.md#list-sessions (200): the user's active sessions, `current` marking this one. */
  list(): Promise<SessionsResponse>;
  /** docs/api.md#revoke-one-session (204); revoking this tab's own session signs every tab out. */
  revoke(sessionId: string): Promise<void>;
  /** docs/api.md#revoke-all-sessions (204): every session of the user ends, this one too: every tab is signed out. */
  revokeAll(): Promise<void>;
}

/**
 * `client.passkeys`: passkeys (W3C WebAuthn Level 3). The ceremonies (`register`, `signIn`) show
 * the browser's prompt: call them from a click or another user gesture. When the browser stops a
 * ceremony they throw, with status 0, `client.passkey_unsupported` (no WebAuthn here: an old
 * browser, or not a secure context; before any request), `client.passkey_cancelled` (the prompt
 * was dismissed or timed out), `client.passkey_exists` (`register`: this authenticator already
 * holds a passkey of the account) or `client.passkey_failed`.
 */
export interface PasskeysApi {
  /**
   * docs/api.md#passkey-registration-options, then docs/api.md#register-a-passkey (201): registers
   * a passkey of the signed-in user (the registration ceremony). Asks the service for creation
   * options, has the browser create the credential, and sends the response with the optional
   * `name` (at most 64 characters; null or empty: none). Resolves to the new passkey. Throws the service's
   * LatchkeyError (such as `auth.passkeys.limit_reached`, 409, or
   * `auth.passkeys.validation_failed`, 400, for a response that does not verify) or a
   * `client.passkey_*` error.
   */
  register(options?: { name?: string | null }): Promise<PasskeyResponse>;
  /**
   * docs/api.md#passkey-sign-in-options, then docs/api.md#sign-in-with-a-passkey (200): signs in
   * with a passkey (the authentication ceremony, a discoverable credential: no username is
   * asked). Gets request options (the browser keeps the challenge cookie), has the browser sign
   * the challenge, and sends the assertion; then as `signIn`: keeps the access token, stores the
   * refresh cookie, and signs in every tab. Throws the service's LatchkeyError (such as
   * `auth.passkeys.invalid_response`, 401, for a passkey the service does not know or no longer
   * has; `auth.sign_in.too_many_attempts`, 429, with `retryAfter`) or a `client.passkey_*` error.
   */
  signIn(): Promise<SignInResponse>;
  /** docs/api.md#list-passkeys (200): the signed-in user's passkeys, oldest first. */
  list(): Promise<PasskeysResponse>;
  /** docs/api.md#rename-a-passkey (200): renames a passkey (`name` at most 64 characters, or null, or empty, to clear it). */
  rename(passkeyId: string, name: string | null): Promise<PasskeyResponse>;
  /**
   * docs/api.md#delete-a-passkey (204): deletes a passkey; it no longer signs in, though the
   * authenticator keeps its credential, and may offer it, until the user removes it there.
   */
  delete(passkeyId: string): Promise<void>;
}

/** How {@link createClient}'s `call` sends a request. */
interface CallOptions {
  /** The JSON body; none when left out. */
  body?: unknown;
  /** Sends the access token (`Authorization: Bearer`), refreshing once on `auth.invalid_access_token` (docs/api.md#bearer-authentication). */
  auth?: boolean;
}

/** The service's code for an access token it refuses (docs/api.md#bearer-authentication). */
const INVALID_ACCESS_TOKEN = 'auth.invalid_access_token';

/** Whether a response is a 401 `auth.invalid_access_token` (its body left unread). */
async function refusesToken(res: Response): Promise<boolean> {
  if (res.status !== 401) return false;
  try {
    return ((await res.clone().json()) as { code?: unknown }).code === INVALID_ACCESS_TOKEN;
  } catch {
    return false;
  }
}

/**
 * Creates a client for the service at `options.baseUrl`. Create one per page. With `restore`
 * (the default) it refreshes at once through the cookie, under the cross-tab lock, to restore a
 * session after a page load; `ready` settles when that is done.
 */
export function createClient(options: ClientOptions): LatchkeyClient {
  const api = `${options.baseUrl.replace(/\/+$/, '')}/auth/v0`;
  const fetchImpl = options.fetch ?? ((input: RequestInfo | URL, init?: RequestInit) => fetch(input, init));
  const listeners = new Map<keyof ClientEvents, Set<(payload: unknown) => void>>();
  const keeper = new TokenKeeper(`${api}/refresh`, `latchkey:${api}`, fetchImpl, (event, payload) => {
    for (const listener of listeners.get(event) ?? []) listener(payload);
  });

  /**
   * Sends `fn(token)` with the current token; on 401 `auth.invalid_access_token` refreshes once
   * (unless another refresh already replaced the token) and sends again.
   */
  async function withToken(fn: (token: string | null) => Promise<Response>): Promise<Response> {
    const token = await keeper.token();
    const res = await fn(token);
    if (token === null || !(await refusesToken(res))) return res;
    const next = keeper.state?.accessToken === token ? (await keeper.refresh())?.accessToken : keeper.state?.accessToken;
    return next === undefined ? res : fn(next);
  }

  /**
   * Calls an operation at `path` under `/auth/v0`; resolves to its parsed body (undefined for a
   * 204), throws LatchkeyError for an error answer and `client.network_error` for none.
   */
  async function call<T>(method: string, path: string, { body, auth = false }: CallOptions = {}): Promise<T> {
    const send = async (token: string | null) => {
      const headers: Record<string, string> = body === undefined ? {} : { 'content-type': 'application/json' };
      if (token !== null) headers.authorization = `Bearer ${token}`;
      try {
        return await fetchImpl(`${api}${path}`, { method, credentials: 'include', headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
      } catch (err) {
        throw networkError(err);
      }
    };
    const res = auth ? await withToken(send) : await send(null);
    if (!res.ok) throw await errorOf(res);
    return (res.status === 204 ? undefined : await res.json()) as T;
  }

  /** Calls an operation (with the access token) that ends every session of the user, then signs every tab out. */
  async function ending(method: string, path: string, body: unknown, reason: string): Promise<void> {
    await call(method, path, { body, auth: true });
    keeper.signOut(reason, true);
  }

  /**
   * Calls an operation that opens a session (sign-in, its second step) and keeps its token.
   * Under the refresh lock: no other tab's refresh is in flight while the cookie changes.
   */
  function opening(path: string, body: unknown): Promise<SignInResponse> {
    return keeper.lock(async () => {
      const res = await call<SignInResponse>('POST', path, { body });
      keeper.set(stateOf(res.tokens.access_token, res.session_id), true);
      return res;
    });
  }

  /**
   * passkeys.ts, imported once on first use; a failed import (a chunk that did not load) is
   * client.network_error, and is tried again next time.
   */
  let ceremonies: Promise<typeof import('./passkeys.js')> | undefined;
  /**
   * The ceremony module, after checking that the browser has WebAuthn (`PublicKeyCredential`,
   * which exists in secure contexts only): throws `client.passkey_unsupported` before any request.
   */
  function passkeys(): Promise<typeof import('./passkeys.js')> {
    if (typeof PublicKeyCredential !== 'function') throw new LatchkeyError('client.passkey_unsupported', 'This browser does not support passkeys here (WebAuthn needs a secure context).', 0);
    ceremonies ??= import('./passkeys.js').catch((err: unknown) => {
      ceremonies = undefined;
      throw networkError(err);
    });
    return ceremonies;
  }

  const tokenOrigins = [globalThis.location?.origin, ...(options.apiOrigins ?? [])];
  const ready = options.restore === false ? Promise.resolve(false) : keeper.refresh().then((s) => s !== null, () => false);

  return {
    ready,
    get signedIn() {
      return keeper.state !== null;
    },
    get sessionId() {
      return keeper.state?.sessionId ?? null;
    },
    accessToken: () => keeper.token(),
    fetch: (input, init) =>
      withToken((token) => {
        const request = new Request(input, init);
        if (token !== null && tokenOrigins.includes(new URL(request.url).origin)) request.headers.set('authorization', `Bearer ${token}`);
        return fetchImpl(request);
      }),
    on(event, listener) {
      const set = listeners.get(event) ?? new Set();
      listeners.set(event, set);
      set.add(listener as (payload: unknown) => void);
      return () => void set.delete(listener as (payload: unknown) => void);
    },
    refresh: async () => (await keeper.refresh()) !== null,
    signUp: (body) => call('POST', '/sign-up', { body }),
    verifyEmail: (body) => call('POST', '/verify-email', { body }),
    resendVerification: (body) => call('POST', '/verify-email/resend', { body }),
    signIn: (body) => opening('/sign-in', body),
    async logout() {
      try {
        await call('POST', '/logout', { auth: true });
      } catch (err) {
        if (err instanceof LatchkeyError && err.status === 401) keeper.signOut(err.code, true);
        throw err;
      }
      keeper.signOut('logout', true);
    },
    me: () => call('GET', '/me', { auth: true }),
    changePassword: (body) => ending('POST', '/change-password', body, 'password_changed'),
    changeEmail: (body) => call('POST', '/change-email', { body, auth: true }),
    confirmEmailChange: (body) => call('POST', '/change-email/confirm', { body, auth: true }),
    deleteAccount: (body) => ending('POST', '/delete-account', body, 'account_deleted'),
    requestPasswordReset: (body) => call('POST', '/password-reset', { body }),
    confirmPasswordReset: (body) => call('POST', '/password-reset/confirm', { body }),
    mfa: {
      verify: (body) => opening('/sign-in/mfa', body),
      setUp: (body) => call('POST', '/mfa/totp/setup', { body, auth: true }),
      enable: (body) => call('POST', '/mfa/totp/enable', { body, auth: true }),
      disable: (body) => call('POST', '/mfa/totp/disable', { body, auth: true }),
      regenerateRecoveryCodes: (body) => call('POST', '/mfa/recovery-codes', { body, auth: true }),
    },
    sessions: {
      list: () => call('GET', '/sessions', { auth: true }),
      async revoke(sessionId) {
        const own = sessionId === keeper.state?.sessionId;
        await call('DELETE', `/sessions/${encodeURIComponent(sessionId)}`, { auth: true });
        if (own) keeper.signOut('session_revoked', true);
      },
      revokeAll: () => ending('DELETE', '/sessions', undefined, 'sessions_revoked'),
    },
    passkeys: {
      async register(options = {}) {
        const loading = passkeys();
        const [{ createCredential }, creation] = await Promise.all([loading, call<PublicKeyCredentialCreationOptionsJSON>('POST', '/passkeys/registration/options', { auth: true })]);
        const response = await createCredential(creation);
        return call('POST', '/passkeys/registration', { body: options.name === undefined ? { response } : { response, name: options.name }, auth: true });
      },
      async signIn() {
        const loading = passkeys();
        const [{ getAssertion }, request] = await Promise.all([loading, call<PublicKeyCredentialRequestOptionsJSON>('POST', '/sign-in/passkey/options')]);
        // The ceremony waits for the user: only the final request runs under the refresh lock.
        return opening('/sign-in/passkey', { response: await getAssertion(request) });
      },
      list: () => call('GET', '/passkeys', { auth: true }),
      rename: (passkeyId, name) => call('PATCH', `/passkeys/${encodeURIComponent(passkeyId)}`, { body: { name }, auth: true }),
      delete: (passkeyId) => call('DELETE', `/passkeys/${encodeURIComponent(passkeyId)}`, { auth: true }),
    },
    providers: () => call('GET', '/oauth/providers'),
    signInWithProvider(providerId, options = {}) {
      const query = options.redirectTo === undefined ? '' : `?redirect_to=${encodeURIComponent(options.redirectTo)}`;
      globalThis.location.assign(`${api}/oauth/${encodeURIComponent(providerId)}/authorize${query}`);
    },
    readProviderError() {
      const url = new URL(globalThis.location.href);
      const error = url.searchParams.get('error');
      if (error === null) return null;
      url.searchParams.delete('error');
      globalThis.history.replaceState(globalThis.history.state, '', url.href);
      return error;
    },
    async linkProvider(providerId, options = {}) {
      const body = options.redirectTo === undefined ? {} : { redirect_to: options.redirectTo };
      const { authorization_url } = await call<LinkResponse>('POST', `/oauth/${encodeURIComponent(providerId)}/link`, { body, auth: true });
      globalThis.location.assign(authorization_url);
    },
    identities: () => call('GET', '/identities', { auth: true }),
    unlinkIdentity: (identityId) => call('DELETE', `/identities/${encodeURIComponent(identityId)}`, { auth: true }),
    setPassword: (body) => call('POST', '/password', { body, auth: true }),
    jwks: () => call('GET', '/.well-known/jwks.json'),
    close: () => keeper.close(),
  };
}
