import { randomUUID } from 'node:crypto';
import type { Queryable } from '../../db/db.js';
import { keysetTimeSql, type KeysetPosition } from './keyset-cursor.js';

/** What an audit entry records (docs/admin-api.md#audit-log), the webhook actions included (the admin API's and `latchkey webhooks`). */
export type AdminAuditAction =
  | 'user.create'
  | 'user.update'
  | 'user.delete'
  | 'user.ban'
  | 'user.unban'
  | 'user.password_reset'
  | 'user.mfa_reset'
  | 'sessions.revoke'
  | 'sessions.revoke_all'
  | 'webhook.create'
  | 'webhook.update'
  | 'webhook.delete'
  | 'webhook.rotate_secret'
  | 'delivery.retry';

/**
 * Who made a change: an admin API key (its id and name, the request's client address with
 * TRUST_PROXY applied, and the answer's `X-Request-Id`), or an operator command ({@link CLI_ACTOR}).
 */
export interface AuditActor {
  readonly keyId: string | null;
  readonly keyName: string;
  readonly ip: string | null;
  readonly requestId: string | null;
}

/** The actor of the operator commands (`latchkey users delete`, `latchkey sessions revoke`, `latchkey webhooks`): no key, no address, no request. */
export const CLI_ACTOR: AuditActor = Object.freeze({ keyId: null, keyName: 'cli', ip: null, requestId: null });

/** Facts of a change: JSON values, never a password, secret or code (docs/admin-api.md#audit-log). */
export type AuditDetails = Readonly<Record<string, string | number | boolean | null | readonly string[]>>;

/** One change to record. */
export interface AuditEntryInput {
  readonly action: AdminAuditAction;
  /** The user the change is about; null for changes about no user (webhooks). */
  readonly userId: string | null;
  readonly details: AuditDetails;
}

/** An `admin_audit_log` row as the admin API answers it, with its keyset position. */
export interface AuditEntryRow {
  id: string;
  at: Date;
  key_id: string | null;
  key_name: string;
  action: AdminAuditAction;
  user_id: string | null;
  ip: string | null;
  request_id: string | null;
  details: Record<string, unknown>;
  /** `at` to the microsecond, for the cursor. */
  cursor_at: string;
}

/**
 * Records one change of the admin API or an operator command in the audit log (migration 017).
 * Call it inside the transaction `tx` that makes the change, after the change: the entry
 * commits with it or not at all, and a call that changed nothing must not record one.
 * @returns the entry's id.
 */
export async function recordAdminAudit(tx: Queryable, actor: AuditActor, entry: AuditEntryInput, now: Date): Promise<string> {
  const id = randomUUID();
  await tx.query(
    `INSERT INTO admin_audit_log (id, at, key_id, key_name, action, user_id, ip, request_id, details)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb)`,
    [id, now, actor.keyId, actor.keyName, entry.action, entry.userId, actor.ip, actor.requestId, JSON.stringify(entry.details)],
  );
  return id;
}

/**
 * Audit entries newest first, strictly below `after` in `(at, id)` order, at most `limit`, all
 * of them or those about `userId`: one range scan of `admin_audit_log_at_idx` or
 * `admin_audit_log_user_idx`, whatever the table's size.
 */
export async function listAdminAudit(q: Queryable, c: { userId: string | undefined; after: KeysetPosition; limit: number }): Promise<AuditEntryRow[]> {
  const columns = `id, at, key_id, key_name, action, user_id, ip, request_id, details, ${keysetTimeSql('at')} AS cursor_at`;
  const { rows } =
    c.userId === undefined
      ? await q.query<AuditEntryRow>(
          `SELECT ${columns} FROM admin_audit_log
            WHERE (at, id) < ($1::timestamptz, $2::uuid)
            ORDER BY at DESC, id DESC LIMIT $3`,
          [c.after.at, c.after.id, c.limit],
        )
      : await q.query<AuditEntryRow>(
          `SELECT ${columns} FROM admin_audit_log
            WHERE user_id = $4 AND (at, id) < ($1::timestamptz, $2::uuid)
            ORDER BY at DESC, id DESC LIMIT $3`,
          [c.after.at, c.after.id, c.limit, c.userId],
        );
  return rows;
}
