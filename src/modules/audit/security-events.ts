import type { FastifyBaseLogger } from 'fastify';

/** Security-relevant events (ASVS 5.0 V16.3): each one structured log line. */
export type SecurityEventName =
  | 'sign_in.succeeded'
  | 'sign_in.failed'
  | 'sign_in.locked'
  | 'sign_in.mfa_required'
  | 'mfa.failed'
  | 'mfa.rate_limited'
  | 'mfa.enabled'
  | 'mfa.disabled'
  | 'mfa.recovery_codes_regenerated'
  | 'passkey.registered'
  | 'passkey.deleted'
  | 'passkey.sign_in_failed'
  | 'sign_up.rate_limited'
  | 'verify_email.rate_limited'
  | 'refresh_token.reused'
  | 'password.changed'
  | 'password.check_failed'
  | 'password.check_locked'
  | 'mfa.codes_failing_notice'
  | 'account.deleted'
  | 'password.reset'
  | 'password_reset.rate_limited'
  | 'email_change.requested'
  | 'email_change.rate_limited'
  | 'email.changed'
  | 'session.revoked'
  | 'oauth.rate_limited'
  | 'oauth.invalid_state'
  | 'oauth.failed'
  | 'oauth.signed_up'
  | 'identity.linked'
  | 'identity.unlinked'
  | 'password.set';

/** What an event may carry: ids and the client IP, never a secret (no password, token or code). */
export interface SecurityEventFields {
  readonly userId?: string | undefined;
  readonly sessionId?: string | undefined;
  readonly ip?: string | null | undefined;
  /** Why (failure reason, revocation cause); from a fixed vocabulary, never user input. */
  readonly reason?: string | undefined;
  /** How many sessions an event affected (revoke-all, password change). */
  readonly count?: number | undefined;
  /** The identity provider's configured id (identity-provider events). */
  readonly provider?: string | undefined;
}

/** Events that call for attention are logged at `warn`, the rest at `info`. */
const WARN_EVENTS: ReadonlySet<SecurityEventName> = new Set(['sign_in.locked', 'password.check_locked', 'mfa.codes_failing_notice', 'sign_up.rate_limited', 'verify_email.rate_limited', 'refresh_token.reused', 'passkey.sign_in_failed', 'oauth.rate_limited']);

/**
 * Writes one security event as `{ event, securityEvent: true, userId, sessionId, ip, reason }`
 * so that log pipelines can select them with one field.
 */
export function securityEvent(log: FastifyBaseLogger, event: SecurityEventName, fields: SecurityEventFields): void {
  const line = { securityEvent: true, event, ...fields };
  if (WARN_EVENTS.has(event)) log.warn(line, event);
  else log.info(line, event);
}
