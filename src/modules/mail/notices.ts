import type { Queryable } from '../../db/db.js';
import type { ClientContext } from '../../plugins/client-context.js';
import type { SecurityNoticeKind } from './mail.templates.js';
import { enqueueEmail } from './outbox.repo.js';
import { newTimeOrderedId } from '../../crypto/ids.js';

export type { SecurityNoticeKind } from './mail.templates.js';

/**
 * How long a queued notice stays worth sending, in seconds: one day. The outbox gives up on a
 * row long before (its ten attempts with backoff take under two hours), so this only bounds a
 * row that an operator puts back with `outbox retry`: news of a change older than a day is no
 * longer a timely warning, and an expired row is cancelled rather than sent.
 */
export const NOTICE_TTL_SECONDS = 86_400;

/** Longest user agent a notice row keeps, in characters (as a session stores it); the email prints less (`NOTICE_MAX_USER_AGENT_LENGTH`). */
export const STORED_USER_AGENT_LENGTH = 512;

/** A notice to queue. */
export interface SecurityNotice {
  readonly kind: SecurityNoticeKind;
  /** The address it goes to: for `email_changed` and `email_change_requested`, the old address. */
  readonly recipient: string;
  /** The username the notice greets. */
  readonly username: string;
  /** When the change happened (the service's clock). */
  readonly at: Date;
  /** Where the change came from: the client of the request, or nulls for an operator's command. */
  readonly client: ClientContext;
  /** Facts particular to the change, one per line (the passkey added or removed, the passkeys an account keeps after a reset). */
  readonly details?: readonly string[];
}

/**
 * Queues a security notice (docs/api.md#security-notices) through the transactional outbox,
 * inside the caller's transaction `tx`, so the notice commits with the change it announces or
 * not at all. The row holds the address and the facts the notice states (kind, username, time,
 * IP address, user agent): never a code, a link, or a reference to the user, so it survives the
 * account's deletion. The user agent is kept cut to {@link STORED_USER_AGENT_LENGTH}; the
 * email quotes and neutralises it when it is sent (`noticeQuote`). The caller nudges the outbox
 * worker after commit.
 * OWASP ASVS 5.0 V6.3.7 (users are notified of changes to their authentication details).
 * @returns the outbox row id.
 */
export async function queueSecurityNotice(tx: Queryable, notice: SecurityNotice): Promise<string> {
  const id = newTimeOrderedId();
  const ua = notice.client.userAgent;
  await enqueueEmail(tx, {
    id,
    kind: 'notice',
    recipient: notice.recipient,
    payload: {
      notice: notice.kind,
      username: notice.username,
      at: notice.at.toISOString(),
      ip: notice.client.ip,
      user_agent: ua === null ? null : oneLine(ua).slice(0, STORED_USER_AGENT_LENGTH),
      ...(notice.details === undefined || notice.details.length === 0 ? {} : { details: notice.details.map(oneLine) }),
    },
    now: notice.at,
    expiresAt: new Date(notice.at.getTime() + NOTICE_TTL_SECONDS * 1000),
  });
  return id;
}

/** The user a notice is about: whom it greets, and the address it may go to. */
export interface NoticeUser {
  readonly username: string;
  readonly email: string | null;
  readonly is_email_verified: boolean;
}

/**
 * The address a security notice about `user` goes to: its email once verified, else none. An
 * address whose owner never proved control of it may be a stranger's (typed by mistake or
 * squatted), who must not learn about an account that uses it.
 */
export function noticeAddress(user: Pick<NoticeUser, 'email' | 'is_email_verified'>): string | null {
  return user.email !== null && user.is_email_verified ? user.email : null;
}

/**
 * The security notice `n.kind` about `user`, queued in `tx` ({@link queueSecurityNotice}) to the
 * user's {@link noticeAddress}, greeting its username: the one way a service tells a user of a
 * change (docs/api.md#security-notices). Nothing is queued when the user has no verified
 * address. The caller nudges the outbox worker after commit when this returned true.
 * @returns whether a notice was queued.
 */
export async function queueUserNotice(tx: Queryable, user: NoticeUser, n: Omit<SecurityNotice, 'recipient' | 'username'>): Promise<boolean> {
  const recipient = noticeAddress(user);
  if (recipient === null) return false;
  await queueSecurityNotice(tx, { ...n, recipient, username: user.username });
  return true;
}

/** `text` on one line: control characters (line breaks included) replaced by spaces, so a name cannot add lines to a notice. */
export function oneLine(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001f\u007f]/g, ' ');
}

