import type { Queryable } from '../../db/db.js';
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

/** Where a change came from: the client of the request, or nothing for an operator's command. */
export interface NoticeClient {
  /** The client IP address as the service sees it (docs/api.md#rate-limits on TRUST_PROXY), or null. */
  readonly ip: string | null;
  /** The User-Agent header, or null. */
  readonly userAgent: string | null;
}

/** A notice to queue. */
export interface SecurityNotice {
  readonly kind: SecurityNoticeKind;
  /** The address it goes to: for `email_changed` and `email_change_requested`, the old address. */
  readonly recipient: string;
  /** The username the notice greets. */
  readonly username: string;
  /** When the change happened (the service's clock). */
  readonly at: Date;
  readonly client: NoticeClient;
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

/** `text` on one line: control characters (line breaks included) replaced by spaces, so a name cannot add lines to a notice. */
export function oneLine(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001f\u007f]/g, ' ');
}

