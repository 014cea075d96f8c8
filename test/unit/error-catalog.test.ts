import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_CATALOG, wireCode, type ErrorCode } from '../../src/errors.js';

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
    ].sort());
    expect(byStatus(410)).toEqual([
      'auth.change_email.code_expired', 'auth.change_email.code_mismatch', 'auth.change_email.too_many_attempts',
      'auth.password_reset.code_expired', 'auth.password_reset.code_mismatch', 'auth.password_reset.too_many_attempts',
      'auth.verify_email.code_expired', 'auth.verify_email.code_mismatch', 'auth.verify_email.too_many_attempts',
    ]);
    expect(byStatus(409)).toEqual([
      'auth.change_email.email_taken', 'auth.mfa.already_enabled', 'auth.passkeys.limit_reached',
      'auth.sign_up.email_taken', 'auth.sign_up.phone_taken', 'auth.sign_up.username_taken',
      'admin.email_taken', 'admin.no_email', 'admin.phone_taken', 'admin.username_taken',
    ].sort());
    expect(byStatus(403)).toEqual(['admin.insufficient_scope', 'auth.email_not_verified', 'auth.mfa_required', 'auth.passkeys.forbidden', 'auth.session_forbidden', 'auth.user_banned']);
    expect(byStatus(404)).toEqual(['admin.not_found', 'admin.user_not_found', 'auth.passkeys.not_found', 'auth.session_not_found', 'auth.verify_email.user_not_found', 'request.not_found']);
  });

  it('a code two entries share is told apart by its status (password reset, email change: 429 rate limit, 410 dead code)', () => {
    for (const op of ['password_reset', 'change_email'] as const) {
      expect(wireCode(`auth.${op}.rate_limited`)).toBe(`auth.${op}.too_many_attempts`);
      expect(ERROR_CATALOG[`auth.${op}.rate_limited`].status).toBe(429);
      expect(ERROR_CATALOG[`auth.${op}.too_many_attempts`].status).toBe(410);
    }
  });
});
