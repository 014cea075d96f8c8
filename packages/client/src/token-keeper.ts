/**
 * Keeps one tab's access token and refreshes it so that no two requests, in this tab or in any
 * other tab of the origin, ever present one refresh token: the service rotates refresh tokens
 * and treats a spent one as theft, revoking the session (docs/api.md#refresh-token-rotation,
 * docs/api.md#reuse-detection).
 *
 * - Single flight in a tab: concurrent callers share one refresh.
 * - Across tabs: every refresh runs under one Web Lock (W3C Web Locks API), so the browser sends
 *   the cookie of the previous refresh, never the same one twice; the result is shared on a
 *   BroadcastChannel, and a tab that waited for the lock while another refreshed takes that
 *   result instead of refreshing again.
 * - Timing: shortly before expiry, with jitter, only while the page is visible (a hidden tab
 *   takes the tokens of visible ones, or refreshes when it needs one); errors back off
 *   exponentially and honour `Retry-After`; a 401 from refresh signs every tab out.
 *
 * The access token lives in this object only (never in storage, OWASP ASVS 5.0 V3.3), and is
 * shared with the origin's own tabs only.
 */
import { errorOf, LatchkeyError, networkError } from './errors.js';
import type { ClientEvents, RefreshResponse } from './types.js';

/** A tab's access token and when it expires by this browser's clock. */
export interface TokenState {
  readonly accessToken: string;
  readonly sessionId: string;
  /** ms since the epoch, local clock: receipt time plus the token's lifetime (`exp - iat`), so clock skew to the service does not matter. */
  readonly expiresAt: number;
  /** The token's lifetime in ms. */
  readonly lifetimeMs: number;
}

type Message = { t: 'token'; s: TokenState } | { t: 'out'; reason: string };
type Emit = <K extends keyof ClientEvents>(event: K, payload: ClientEvents[K]) => void;

/** Refresh this share of the lifetime before expiry (a 15-minute token: at most REFRESH_AHEAD_MAX_MS before). */
const REFRESH_AHEAD_SHARE = 0.2;
const REFRESH_AHEAD_MAX_MS = 60_000;
/** Random extra lead of up to this share of the lifetime (capped), so that tabs and clients do not refresh in step. */
const JITTER_SHARE = 0.1;
const JITTER_MAX_MS = 30_000;
/** A token this close to expiry is treated as expired: it could expire on its way (the service allows 5 s of skew, docs/api.md#access-token). */
const EXPIRY_MARGIN_MS = 2_000;
/**
 * A refresh that has not answered by then is abandoned (and retried with back-off), so that a hung
 * request cannot hold the cross-tab lock, and with it every tab, for ever.
 */
const REFRESH_TIMEOUT_MS = 30_000;
/** First delay after a failed refresh; doubles per failure up to BACKOFF_MAX_MS, with jitter (full jitter halves it at random). */
const BACKOFF_BASE_MS = 1_000;
const BACKOFF_MAX_MS = 60_000;

/** Decodes the claims of a JWT without checking it (the service checks it; this only reads its times). */
function claimsOf(jwt: string): { iat?: number; exp?: number } {
  try {
    const part = jwt.split('.')[1] ?? '';
    return JSON.parse(atob(part.replace(/-/g, '+').replace(/_/g, '/'))) as { iat?: number; exp?: number };
  } catch {
    return {};
  }
}

/** The state for a token received just now. */
export function stateOf(accessToken: string, sessionId: string): TokenState {
  const { iat, exp } = claimsOf(accessToken);
  const lifetimeMs = typeof iat === 'number' && typeof exp === 'number' && exp > iat ? (exp - iat) * 1000 : 60_000;
  return { accessToken, sessionId, expiresAt: Date.now() + lifetimeMs, lifetimeMs };
}

const hidden = () => typeof document !== 'undefined' && document.visibilityState === 'hidden';

export class TokenKeeper {
  state: TokenState | null = null;
  /** Bumped on every change of `state`, here or from another tab. */
  private generation = 0;
  private inflight: Promise<TokenState | null> | null = null;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** A refresh fell due while the page was hidden. */
  private due = false;
  private failures = 0;
  private retryAt = 0;
  private lastError: LatchkeyError | null = null;
  private readonly channel: BroadcastChannel | null;
  private readonly onVisible = () => {
    if (!hidden() && (this.due || (this.state !== null && this.state.expiresAt - Date.now() < this.lead(this.state)))) void this.refresh().catch(() => {});
  };

  constructor(
    private readonly refreshUrl: string,
    private readonly name: string,
    private readonly fetchImpl: typeof fetch,
    private readonly emit: Emit,
  ) {
    this.channel = typeof BroadcastChannel === 'function' ? new BroadcastChannel(name) : null;
    if (this.channel) this.channel.onmessage = (e: MessageEvent<Message>) => this.receive(e.data);
    if (typeof document !== 'undefined') {
      document.addEventListener('visibilitychange', this.onVisible);
      document.addEventListener('resume', this.onVisible);
    }
  }

  /** Runs `fn` holding the origin-wide refresh lock (without the Web Locks API: in this tab only). */
  lock<T>(fn: () => Promise<T>): Promise<T> {
    const locks = typeof navigator !== 'undefined' ? navigator.locks : undefined;
    return locks ? (locks.request(this.name, fn) as Promise<T>) : fn();
  }

  /**
   * A usable access token: the current one, or a refreshed one when it is about to expire; null
   * when signed out. Rejects with the refresh's LatchkeyError when none can be had now.
   */
  async token(): Promise<string | null> {
    const s = this.state;
    if (s !== null && s.expiresAt - EXPIRY_MARGIN_MS > Date.now()) return s.accessToken;
    if (s === null && this.inflight === null) return null;
    return (await this.refresh())?.accessToken ?? null;
  }

  /**
   * Refreshes (docs/api.md#refresh) once for all callers of this tab, under the cross-tab lock;
   * takes another tab's result when one arrived while waiting. Resolves to the new state, or
   * null when the service answered 401 (then every tab is signed out). During a back-off after
   * errors it makes no request: it resolves to the current token if that is still valid, else
   * rejects with the last error.
   */
  refresh(): Promise<TokenState | null> {
    if (this.inflight) return this.inflight;
    if (Date.now() < this.retryAt) {
      const s = this.state;
      return s !== null && s.expiresAt - EXPIRY_MARGIN_MS > Date.now() ? Promise.resolve(s) : Promise.reject(this.lastError);
    }
    const startedAt = this.generation;
    this.inflight = this.lock(async () => {
      // Let a result that the previous holder of the lock broadcast arrive before deciding.
      await new Promise((resolve) => setTimeout(resolve, 0));
      if (this.generation !== startedAt) return this.state;
      return this.exchange();
    }).finally(() => {
      this.inflight = null;
    });
    return this.inflight;
  }

  /** POST /refresh; the caller holds the lock. */
  private async exchange(): Promise<TokenState | null> {
    let res: Response;
    try {
      res = await this.fetchImpl(this.refreshUrl, { method: 'POST', credentials: 'include', signal: AbortSignal.timeout(REFRESH_TIMEOUT_MS) });
    } catch (err) {
      throw this.failed(networkError(err));
    }
    if (res.ok) {
      const body = (await res.json()) as RefreshResponse;
      this.failures = 0;
      this.retryAt = 0;
      this.set(stateOf(body.tokens.access_token, body.session_id), true);
      return this.state;
    }
    const err = await errorOf(res);
    if (res.status === 401) {
      this.signOut(err.code, true);
      return null;
    }
    throw this.failed(err);
  }

  /** Records a failed refresh and schedules the next try: exponential back-off with jitter, at least `Retry-After`. */
  private failed(err: LatchkeyError): LatchkeyError {
    this.failures++;
    const backoff = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (this.failures - 1)) * (0.5 + Math.random() / 2);
    const delay = Math.max(backoff, (err.retryAfter ?? 0) * 1000);
    this.retryAt = Date.now() + delay;
    this.lastError = err;
    // Keep trying in the background while there is a session to keep (or one being restored).
    this.arm(delay);
    return err;
  }

  /** Adopts a new token (`announce`: tell the other tabs) and plans the next refresh. */
  set(s: TokenState, announce: boolean): void {
    const wasSignedOut = this.state === null || this.state.sessionId !== s.sessionId;
    this.state = s;
    this.generation++;
    this.due = false;
    if (announce) this.channel?.postMessage({ t: 'token', s } satisfies Message);
    this.arm(s.expiresAt - Date.now() - this.lead(s) - Math.random() * Math.min(JITTER_MAX_MS, s.lifetimeMs * JITTER_SHARE));
    this.emit(wasSignedOut ? 'signedIn' : 'tokenRefreshed', { sessionId: s.sessionId });
  }

  /** Forgets the token (`announce`: in every tab) and emits signedOut if there was one. */
  signOut(reason: string, announce: boolean): void {
    const had = this.state !== null;
    this.state = null;
    this.generation++;
    clearTimeout(this.timer);
    if (announce) this.channel?.postMessage({ t: 'out', reason } satisfies Message);
    if (had) this.emit('signedOut', { reason });
  }

  /** Stops timers and listeners; the token is forgotten. */
  close(): void {
    clearTimeout(this.timer);
    this.state = null;
    this.channel?.close();
    if (typeof document !== 'undefined') {
      document.removeEventListener('visibilitychange', this.onVisible);
      document.removeEventListener('resume', this.onVisible);
    }
  }

  /** How long before expiry a refresh is due. */
  private lead(s: TokenState): number {
    return Math.min(REFRESH_AHEAD_MAX_MS, s.lifetimeMs * REFRESH_AHEAD_SHARE);
  }

  /** Plans a refresh in `delay` ms; a hidden page only marks it due (the visible handler runs it). */
  private arm(delay: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(
      () => {
        if (hidden()) this.due = true;
        else void this.refresh().catch(() => {});
      },
      Math.max(0, delay),
    );
  }

  private receive(m: Message): void {
    if (m.t === 'token') {
      this.failures = 0;
      this.retryAt = 0;
      this.set(m.s, false);
    } else this.signOut(m.reason, false);
  }
}
