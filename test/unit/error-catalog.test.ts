import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CALLBACK_ERRORS, ERROR_CATALOG, wireCode, type ErrorCode } from '../../src/errors.js';

describe('error catalog (docs/api.md#error-codes)', () => {
  it('every code is documented in docs/errors.md with its status', () => {
    const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
    for (const [code, { status }] of Object.entries(ERROR_CATALOG)) {
      expect(doc).toContain(`| ${status} | \`${wireCode(code as ErrorCode)}\` |`);
    }
  });

  it('every code is in the catalogue of docs/api.md#error-codes, with its status and message, in a row of that table', () => {
    const doc = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
    const catalogue = doc.slice(doc.indexOf('### Error codes'));
    const rows = catalogue.split('\n').filter((line) => line.startsWith('| ') && line.split(' | ').length === 4);
    for (const [code, { status, message }] of Object.entries(ERROR_CATALOG)) {
      const row = rows.find((line) => line.includes(`| \`${wireCode(code as ErrorCode)}\` | ${message.replace('<token>', '\\<token\\>')} |`));
      expect(row, code).toBeDefined();
      expect(row!.startsWith(`| ${status}`), code).toBe(true);
    }
  });

  it('uses the statuses docs/api.md#error-codes gives', () => {
    const byStatus = (s: number) => Object.entries(ERROR_CATALOG).filter(([, v]) => v.status === s).map(([k]) => k).sort();
    expect(byStatus(401)).toEqual([
      'auth.invalid_access_token', 'auth.invalid_credentials', 'auth.invalid_current_password',
      'auth.mfa.challenge_expired', 'auth.mfa.invalid_code', 'auth.mfa.missing_challenge',
      'auth.passkeys.invalid_response', 'auth.passkeys.missing_challenge',
      'auth.missing_access_token', 'auth.missing_refresh_token', 'auth.invalid_refresh_token', 'auth.refresh_token_reused',
      'admin.invalid_api_key',
      'auth.reauthentication_required',
    ].sort());
    expect(byStatus(410)).toEqual([
      'auth.change_email.code_expired', 'auth.change_email.code_mismatch', 'auth.change_email.too_many_attempts',
      'auth.password_reset.code_expired', 'auth.password_reset.code_mismatch', 'auth.password_reset.too_many_attempts',
      'auth.verify_email.code_expired', 'auth.verify_email.code_mismatch', 'auth.verify_email.too_many_attempts',
    ]);
    expect(byStatus(409)).toEqual([
      'auth.change_email.email_taken', 'auth.identities.last_sign_in_method', 'auth.mfa.already_enabled', 'auth.passkeys.limit_reached',
      'auth.password.already_set', 'auth.sign_up.email_taken', 'auth.sign_up.phone_taken', 'auth.sign_up.username_taken',
      'admin.email_taken', 'admin.no_email', 'admin.phone_taken', 'admin.username_taken',
    ].sort());
    expect(byStatus(403)).toEqual(['admin.insufficient_scope', 'auth.email_not_verified', 'auth.identities.forbidden', 'auth.mfa_required', 'auth.passkeys.forbidden', 'auth.session_forbidden', 'auth.user_banned']);
    expect(byStatus(404)).toEqual(['admin.not_found', 'admin.user_not_found', 'auth.identities.not_found', 'auth.oauth.unknown_provider', 'auth.passkeys.not_found', 'auth.session_not_found', 'auth.verify_email.user_not_found', 'request.not_found']);
    expect(byStatus(503)).toEqual(['auth.oauth.provider_unavailable', 'service_unavailable']);
    expect(byStatus(400).filter((c) => c.startsWith('auth.oauth.') || c.startsWith('auth.password.'))).toEqual([
      'auth.oauth.invalid_redirect', 'auth.oauth.invalid_state', 'auth.oauth.validation_failed', 'auth.password.validation_failed',
    ]);
  });

  it('a code two entries share is told apart by its status (password reset, email change: 429 rate limit, 410 dead code)', () => {
    for (const op of ['password_reset', 'change_email'] as const) {
      expect(wireCode(`auth.${op}.rate_limited`)).toBe(`auth.${op}.too_many_attempts`);
      expect(ERROR_CATALOG[`auth.${op}.rate_limited`].status).toBe(429);
      expect(ERROR_CATALOG[`auth.${op}.too_many_attempts`].status).toBe(410);
    }
  });

  it('every code a callback redirect carries in error= is documented in docs/errors.md and docs/api.md#callback-errors', () => {
    const errors = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
    const api = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
    const section = api.slice(api.indexOf('### Callback errors'), api.indexOf('\n### ', api.indexOf('### Callback errors') + 1));
    for (const [code, meaning] of Object.entries(CALLBACK_ERRORS)) {
      expect(errors, code).toContain(`| \`${code}\` | ${meaning} |`);
      expect(section, code).toContain(`\`${code}\``);
    }
    expect(Object.keys(CALLBACK_ERRORS).sort()).toEqual([
      'auth.email_not_verified', 'auth.mfa_required', 'auth.oauth.account_exists', 'auth.oauth.email_not_verified', 'auth.oauth.identity_taken',
      'auth.oauth.invalid_response', 'auth.oauth.link_expired', 'auth.oauth.provider_error', 'auth.oauth.provider_unavailable', 'auth.user_banned',
    ]);
  });
});
