import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { generateRsaKeyPair, loadKeyStore } from '../../src/modules/keys/keys.service.js';

/** CODE_HMAC_KEY_FILE (docs/decisions.md, "One-time codes"): a code key that outlives the signing key. */
const dir = mkdtempSync(path.join(tmpdir(), 'code-hmac-key-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, content: string | Buffer): string {
  const p = path.join(dir, name);
  writeFileSync(p, content, { mode: 0o600 });
  return p;
}

describe('the HMAC key of one-time codes', () => {
  const signingA = file('a.pem', generateRsaKeyPair().privateKeyPem);
  const signingB = file('b.pem', generateRsaKeyPair().privateKeyPem);
  const codeKey = file('code.key', `${randomBytes(48).toString('base64')}\n`);

  it('with CODE_HMAC_KEY_FILE it survives a change of signing key; the rate-limit key still follows the signing key', async () => {
    const a = await loadKeyStore({ privateKeyFile: signingA, publicKeyFiles: [], dataDir: dir, codeHmacKeyFile: codeKey });
    const b = await loadKeyStore({ privateKeyFile: signingB, publicKeyFiles: [], dataDir: dir, codeHmacKeyFile: codeKey });
    expect(a.codeHmacKey.equals(b.codeHmacKey)).toBe(true);
    expect(a.rateLimitHmacKey.equals(b.rateLimitHmacKey)).toBe(false);
  });

  it('without it the code key is derived from the signing key, as before (a change of signing key invalidates outstanding codes)', async () => {
    const a = await loadKeyStore({ privateKeyFile: signingA, publicKeyFiles: [], dataDir: dir });
    const b = await loadKeyStore({ privateKeyFile: signingB, publicKeyFiles: [], dataDir: dir });
    const withFile = await loadKeyStore({ privateKeyFile: signingA, publicKeyFiles: [], dataDir: dir, codeHmacKeyFile: codeKey });
    expect(a.codeHmacKey.equals(b.codeHmacKey)).toBe(false);
    expect(a.codeHmacKey.equals(withFile.codeHmacKey)).toBe(false);
  });

  it('a missing file or one under 32 bytes stops the start with the setting named', () => {
    const short = file('short.key', 'only 20 bytes here!\n');
    expect(() => loadConfig({ DATA_DIR: dir, CODE_HMAC_KEY_FILE: short })).toThrow(ConfigError);
    expect(() => loadConfig({ DATA_DIR: dir, CODE_HMAC_KEY_FILE: short })).toThrow(/CODE_HMAC_KEY_FILE: .*at least 32/);
    expect(() => loadConfig({ DATA_DIR: dir, CODE_HMAC_KEY_FILE: path.join(dir, 'absent') })).toThrow(/CODE_HMAC_KEY_FILE: cannot read/);
    expect(loadConfig({ DATA_DIR: dir, CODE_HMAC_KEY_FILE: codeKey }).codeHmacKeyFile).toBe(codeKey);
  });

  it('PASSWORD_RESET_URL must be an absolute http(s) URL without a fragment', () => {
    expect(loadConfig({ DATA_DIR: dir, PASSWORD_RESET_URL: 'https://app.example.com/reset' }).passwordResetUrl).toBe('https://app.example.com/reset');
    for (const bad of ['/reset', 'ftp://app.example.com/reset', 'https://app.example.com/reset#x', 'javascript:alert(1)']) {
      expect(() => loadConfig({ DATA_DIR: dir, PASSWORD_RESET_URL: bad }), bad).toThrow(/PASSWORD_RESET_URL/);
    }
    expect(loadConfig({ DATA_DIR: dir }).oneTimeCodeTtlSeconds).toBe(900);
  });
});
