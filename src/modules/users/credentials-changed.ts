import type { FastifyBaseLogger } from 'fastify';
import type { Queryable } from '../../db/db.js';
import type { AuthMetrics } from '../../metrics.js';
import type { ClientContext } from '../../plugins/client-context.js';
import { securityEvent, type SecurityEventName } from '../audit/security-events.js';
import type { OneTimeCodes } from '../codes/one-time-codes.service.js';
import { recordEvent } from '../events/events.shared.js';
import { queueUserNotice, type NoticeUser, type SecurityNoticeKind } from '../mail/notices.js';
import { revokeAllSessions } from '../sessions/sessions.shared.js';

/** How the password changed: by its owner with the current one (change-password), or with a reset code. */
export type CredentialsChangeCause = 'password_changed' | 'password_reset';

/** What differs between the causes: the `via` of the `password.changed` event, the notice and the security event. */
const CAUSES: Record<CredentialsChangeCause, { via: 'change_password' | 'reset'; notice: SecurityNoticeKind; event: SecurityEventName }> = {
  password_changed: { via: 'change_password', notice: 'password_changed', event: 'password.changed' },
  password_reset: { via: 'reset', notice: 'password_reset', event: 'password.reset' },
};

/** One password change as {@link CredentialsChanges.revoke} recorded it, for {@link CredentialsChanges.announce}. */
export interface CredentialsChanged {
  readonly cause: CredentialsChangeCause;
  readonly userId: string;
  /** The session that made the change (change-password); undefined for a reset, made signed out. */
  readonly sessionId: string | undefined;
  readonly ip: string | null;
  /** How many sessions were revoked. */
  readonly sessionsRevoked: number;
  /** Whether the notice was queued (the user has an address to send it to). */
  readonly noticeQueued: boolean;
}

/** Dependencies of {@link createCredentialsChanges}. */
export interface CredentialsChangesDeps {
  readonly codes: Pick<OneTimeCodes, 'revokeAll'>;
  readonly metrics: Pick<AuthMetrics, 'sessionsRevoked'>;
  readonly log: FastifyBaseLogger;
  /** Called after a commit that queued an email. */
  readonly onEmailQueued: () => void;
}

/**
 * "Credentials changed": what follows a new password, the one implementation for change-password
 * (docs/api.md#change-password) and a password reset (docs/api.md#confirm-a-password-reset). A new
 * password ends everything the old one let in or let start (OWASP ASVS 5.0 V7.4.3: the other sessions end
 * after a change of an authentication factor; V6.3.7: the user is told).
 */
export interface CredentialsChanges {
  /**
   * Inside the transaction `tx` that replaced the password, in this order: revokes every
   * session of the user with `cause` as reason (a `session.revoked` event each), records the
   * `password.changed` event (`via` `change_password` or `reset`), ends the user's outstanding
   * password-reset codes (a code issued before the change must not undo it) and email-change
   * codes (asked for with the old password), cancelling their queued emails, and queues the
   * `password_changed` or `password_reset` notice to the user's verified address, with
   * `details`. No metric or log line: those wait for the commit ({@link announce}).
   * @param c.user the user as the transaction sees it; a reset passes its address as verified
   *   (the reset code proved it, and the reset marks it verified in the same transaction).
   * @param c.sessionId the session that made the change, for the security event.
   */
  revoke(
    tx: Queryable,
    c: {
      cause: CredentialsChangeCause;
      user: NoticeUser & { readonly id: string };
      now: Date;
      client: ClientContext;
      sessionId?: string | undefined;
      details?: readonly string[] | undefined;
    },
  ): Promise<CredentialsChanged>;
  /**
   * After the commit of {@link revoke}'s transaction: counts the revoked sessions
   * (`latchkey_sessions_revoked_total`, by cause), nudges the outbox worker when a notice was
   * queued, and logs the security event (`password.changed` or `password.reset`, with the
   * user, session, client IP and the count of revoked sessions).
   */
  announce(changed: CredentialsChanged): void;
}

/** Builds the {@link CredentialsChanges}. */
export function createCredentialsChanges(deps: CredentialsChangesDeps): CredentialsChanges {
  const { codes, metrics, log, onEmailQueued } = deps;
  return {
    async revoke(tx, c) {
      const { user, now } = c;
      const cause = CAUSES[c.cause];
      const sessionsRevoked = await revokeAllSessions(tx, user.id, c.cause, now);
      await recordEvent(tx, { type: 'password.changed', data: { user_id: user.id, via: cause.via } }, now);
      await codes.revokeAll(tx, 'password_reset', { id: user.id, email: user.email });
      await codes.revokeAll(tx, 'email_change', { id: user.id, email: null });
      const noticeQueued = await queueUserNotice(tx, user, { kind: cause.notice, at: now, client: c.client, ...(c.details === undefined ? {} : { details: c.details }) });
      return { cause: c.cause, userId: user.id, sessionId: c.sessionId, ip: c.client.ip, sessionsRevoked, noticeQueued };
    },

    announce(changed) {
      metrics.sessionsRevoked(changed.cause, changed.sessionsRevoked);
      if (changed.noticeQueued) onEmailQueued();
      securityEvent(log, CAUSES[changed.cause].event, { userId: changed.userId, sessionId: changed.sessionId, ip: changed.ip, count: changed.sessionsRevoked });
    },
  };
}
