import type { Queryable } from '../../db/db.js';

/** Sign-in, or link to the user (and session) that asked. */
export type FlowMode = { readonly kind: 'sign_in' } | { readonly kind: 'link'; readonly userId: string; readonly sessionId: string };

/** A flow as the callback needs it, once consumed. */
export interface ConsumedFlow {
  readonly id: string;
  readonly codeVerifier: string;
  readonly nonce: string | null;
  readonly redirectTo: string;
  readonly mode: FlowMode;
}

/**
 * Stores a new authorization flow (migration 015): the SHA-256 of its `state` and of the
 * `oauth_flow` cookie, the PKCE verifier, the nonce, where it returns, and its mode.
 */
export async function insertFlow(
  q: Queryable,
  f: {
    id: string;
    provider: string;
    stateHash: string;
    browserHash: string;
    codeVerifier: string;
    nonce: string | null;
    redirectTo: string;
    mode: FlowMode;
    now: Date;
    expiresAt: Date;
  },
): Promise<void> {
  const link = f.mode.kind === 'link' ? f.mode : undefined;
  await q.query(
    `INSERT INTO oauth_flows (id, provider, state_hash, browser_hash, code_verifier, nonce, redirect_to, mode, user_id, session_id, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
    [f.id, f.provider, f.stateHash, f.browserHash, f.codeVerifier, f.nonce, f.redirectTo, f.mode.kind, link?.userId ?? null, link?.sessionId ?? null, f.now, f.expiresAt],
  );
}

/**
 * Consumes the flow of `stateHash` (index `oauth_flows_state_hash_key`), once: one guarded
 * UPDATE that matches only an unconsumed flow of this provider, unexpired at `now`, started by
 * the browser whose cookie hashes to `browserHash`. Of two callbacks with one state, on one
 * instance or two, exactly one gets the flow. A state of another provider, a foreign cookie or
 * a used or expired flow change nothing.
 * @returns the flow, or undefined when no flow matches.
 */
export async function consumeFlow(q: Queryable, c: { provider: string; stateHash: string; browserHash: string; now: Date }): Promise<ConsumedFlow | undefined> {
  const { rows } = await q.query<{ id: string; code_verifier: string; nonce: string | null; redirect_to: string; mode: 'sign_in' | 'link'; user_id: string | null; session_id: string | null }>(
    `UPDATE oauth_flows SET consumed_at = $4
      WHERE state_hash = $2 AND provider = $1 AND browser_hash = $3 AND consumed_at IS NULL AND expires_at > $4
     RETURNING id, code_verifier, nonce, redirect_to, mode, user_id, session_id`,
    [c.provider, c.stateHash, c.browserHash, c.now],
  );
  const r = rows[0];
  if (r === undefined) return undefined;
  const mode: FlowMode = r.mode === 'link' && r.user_id !== null && r.session_id !== null ? { kind: 'link', userId: r.user_id, sessionId: r.session_id } : { kind: 'sign_in' };
  return { id: r.id, codeVerifier: r.code_verifier, nonce: r.nonce, redirectTo: r.redirect_to, mode };
}
