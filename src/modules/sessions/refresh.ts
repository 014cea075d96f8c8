import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../clock.js';
import type { Db, Queryable } from '../../db/db.js';
import { createStatementDeadlines } from '../../db/statement-deadline.js';
import { AppError } from '../../errors.js';
import type { AuthMetrics } from '../../metrics.js';
import { newRefreshToken, parseRefreshToken, type PresentedRefreshToken } from '../../crypto/refresh-token.js';
import type { AccessTokenService } from '../tokens/access-token.service.js';
import { securityEvent } from '../audit/security-events.js';
import { isWithinGraceWindow, liveTokenWithinGrace, successorCiphertextFor } from './refresh-grace.js';
import { lockRefreshToken, rotateLiveRefreshToken, type RotatedRefreshToken } from './refresh-tokens.repo.js';
import { LAST_USED_RESOLUTION_SECONDS, revokeSession, touchSession } from './sessions.repo.js';
import type { ClientContext } from '../../plugins/client-context.js';
import type { IssuedTokens } from './issued-tokens.js';
import { recordEvent } from '../events/events.shared.js';

/** Dependencies of {@link createRefresh}: the matching fields of the sessions service's. */
export interface RefreshDeps {
  readonly db: Db;
  readonly clock: Clock;
  readonly accessTokens: AccessTokenService;
  /** `REFRESH_REUSE_GRACE_SECONDS` (0 to 300): 0 is the strict reuse rule (docs/api.md#reuse-grace-window). */
  readonly refreshReuseGraceSeconds: number;
  readonly log: FastifyBaseLogger;
  readonly metrics: AuthMetrics;
}

/** What the locking transaction decided for a token the one-statement rotation did not rotate. */
type SlowOutcome =
  | { readonly kind: 'invalid' }
  | { readonly kind: 'rotated' | 'replayed'; readonly sessionId: string; readonly userId: string; readonly tokens: IssuedTokens }
  | { readonly kind: 'reused'; readonly revoked: boolean; readonly sessionId: string; readonly userId: string };

const MS_PER_SECOND = 1000;
const secondsUntil = (when: Date, now: Date): number => Math.max(0, Math.floor((when.getTime() - now.getTime()) / MS_PER_SECOND));

/**
 * Refresh-token rotation (docs/api.md#refresh-token-rotation), the `refresh` of the sessions
 * service. The common case, a live token of a live session, is one statement on its own
 * (`rotateLiveRefreshToken`: one round trip, one commit) followed by the access token's
 * signature; anything else (unknown, rotated: reuse or grace, ended) is decided by a locking
 * transaction (`decide`). The statement is not wrapped in BEGIN/COMMIT: a copy of it held back
 * by a silent network, reaching the server after this request answered 503, would then commit
 * on its own and rotate the token the client presents again (reuse, and the session revoked).
 * It checks a deadline on the database's clock instead, after its locks and writes and before
 * it commits (src/db/statement-deadline.ts, docs/reliability.md), which costs no round trip.
 *
 * A rotated token presented again (reuse) revokes its session and records the
 * `refresh_token.reuse_detected` event with the client of that request (its `ip` and `userAgent`).
 *
 * @returns `refresh(presented, client)`, as {@link SessionsService.refresh} documents it.
 */
export function createRefresh(deps: RefreshDeps): (presented: string | undefined, client: ClientContext) => Promise<IssuedTokens> {
  const { db, clock, accessTokens, refreshReuseGraceSeconds, log, metrics } = deps;
  const deadlines = createStatementDeadlines(db);

  /** The one rotation write ({@link rotateLiveRefreshToken}) of the `presented` token, with a new successor. */
  const rotate = async (q: Queryable, presented: PresentedRefreshToken, now: Date, deadline: Date | null) => {
    const successor = newRefreshToken();
    const rotated = await rotateLiveRefreshToken(q, {
      presented,
      now,
      successor: { id: successor.id, tokenHash: successor.tokenHash, ciphertext: successorCiphertextFor(refreshReuseGraceSeconds, presented.token, successor.token) },
      lastUsedResolutionSeconds: LAST_USED_RESOLUTION_SECONDS,
      deadline,
    });
    return rotated === undefined ? undefined : { rotated, refreshToken: successor.token };
  };

  /** Signs an access token for the family; `refreshToken` goes into the cookie. */
  const issue = async (family: Pick<RotatedRefreshToken, 'session_id' | 'user_id' | 'amr' | 'session_expires_at'>, refreshToken: string, now: Date): Promise<IssuedTokens> => {
    const accessToken = await accessTokens.sign({ userId: family.user_id, sessionId: family.session_id, amr: family.amr });
    return { sessionId: family.session_id, accessToken, refreshToken, refreshMaxAgeSeconds: secondsUntil(family.session_expires_at, now) };
  };

  /** The locking transaction for a token that was not live: invalid, grace replay, reuse, or a rotation after all. */
  const decide = (presented: PresentedRefreshToken, now: Date, client: ClientContext): Promise<SlowOutcome> =>
    db.transaction(async (tx): Promise<SlowOutcome> => {
      const token = await lockRefreshToken(tx, presented, now);
      if (token === undefined) return { kind: 'invalid' };
      const family = { sessionId: token.session_id, userId: token.user_id };
      if (token.rotated_at !== null) {
        // Within its grace window in the session's last second: the replay could only hand out
        // a cookie with Max-Age=0, and two tabs racing is no reuse. Invalid, like any refresh there.
        if (token.family_in_last_second && isWithinGraceWindow(token.rotated_at, now, refreshReuseGraceSeconds)) return { kind: 'invalid' };
        // docs/api.md#reuse-grace-window: the live token's immediate parent, shortly after its
        // rotation, gets that same live token back. Everything else rotated is reuse.
        const live = await liveTokenWithinGrace(tx, token, presented.token, { graceSeconds: refreshReuseGraceSeconds, now });
        if (live !== undefined) {
          await touchSession(tx, token.session_id, now);
          return { kind: 'replayed', ...family, tokens: await issue(token, live, now) };
        }
        const revoked = await revokeSession(tx, token.session_id, 'refresh_token_reuse', now);
        // Recorded with the revocation, which commits although the request fails (docs/api.md#event-types).
        await recordEvent(
          tx,
          { type: 'refresh_token.reuse_detected', data: { user_id: token.user_id, session_id: token.session_id, ip: client.ip, user_agent: client.userAgent } },
          now,
        );
        return { kind: 'reused', revoked, ...family };
      }
      // Live after all (the one statement found it otherwise a moment ago): the same rotation,
      // under the locks taken here; it rotates nothing when the family has ended.
      const done = await rotate(tx, presented, now, null);
      if (done === undefined) return { kind: 'invalid' };
      return { kind: 'rotated', ...family, tokens: await issue(done.rotated, done.refreshToken, now) };
    });

  return async (cookie, client) => {
    const { ip } = client;
    if (cookie === undefined || cookie === '') {
      metrics.refresh('missing');
      throw new AppError('auth.missing_refresh_token');
    }
    // Only the canonical spelling of a token's bytes is ours (docs/api.md#canonical-token-spelling);
    // any other text (another spelling of a live token included) is invalid before anything is
    // read or sealed.
    const presented = parseRefreshToken(cookie);
    if (presented === undefined) {
      metrics.refresh('invalid');
      throw new AppError('auth.invalid_refresh_token');
    }
    const now = clock.now();
    const done = await rotate(db, presented, now, await deadlines.next());
    if (done !== undefined) {
      deadlines.observe(done.rotated.database_now);
      metrics.refresh('rotated');
      return issue(done.rotated, done.refreshToken, now);
    }
    const outcome = await decide(presented, now, client);
    switch (outcome.kind) {
      case 'rotated':
        metrics.refresh('rotated');
        return outcome.tokens;
      case 'replayed':
        metrics.refresh('grace_replay');
        log.info({ event: 'refresh_token_grace_replay', sessionId: outcome.sessionId, userId: outcome.userId }, 'parent refresh token presented within the grace window; live token returned');
        return outcome.tokens;
      case 'reused':
        metrics.refresh('reused');
        if (outcome.revoked) metrics.sessionsRevoked('refresh_token_reuse');
        // Reuse is an operational signal (docs/security.md). Never log the token itself.
        securityEvent(log, 'refresh_token.reused', { sessionId: outcome.sessionId, userId: outcome.userId, ip, reason: 'session revoked' });
        throw new AppError('auth.refresh_token_reused');
      case 'invalid':
        metrics.refresh('invalid');
        throw new AppError('auth.invalid_refresh_token');
    }
  };
}
