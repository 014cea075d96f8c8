import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('loadConfig (README "Configuration")', () => {
  it('zero configuration gives the documented defaults', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      host: '127.0.0.1',
      port: 3000,
      databaseUrl: undefined,
      dataDir: path.resolve('./data'),
      migrateOnStart: true,
      jwt: { privateKeyFile: undefined, publicKeyFiles: [], issuer: 'latchkey', audience: 'latchkey', accessTokenTtlSeconds: 900, accessTokenCacheSize: 10000 },
      sessionTtlSeconds: 2592000,
      verificationCodeTtlSeconds: 900,
      refreshReuseGraceSeconds: 0,
      smtp: undefined,
      trustProxy: false,
      corsOrigins: [],
      logLevel: 'info',
      argon2: { memoryCost: 19456, timeCost: 2, parallelism: 1 },
    });
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.jwt)).toBe(true);
  });

  it('reads every SMTP setting; the port follows the TLS mode', () => {
    const base = { SMTP_HOST: 'mail.example.com', SMTP_FROM: 'no-reply@example.com' };
    expect(loadConfig(base).smtp).toEqual({ host: 'mail.example.com', port: 587, tls: 'starttls', username: undefined, password: undefined, from: 'no-reply@example.com', fromName: undefined });
    expect(loadConfig({ ...base, SMTP_TLS: 'tls' }).smtp?.port).toBe(465);
    expect(loadConfig({ ...base, SMTP_TLS: 'none', SMTP_PORT: '2525', SMTP_USERNAME: 'u', SMTP_PASSWORD: 'p', SMTP_FROM_NAME: 'Example' }).smtp).toEqual({
      host: 'mail.example.com', port: 2525, tls: 'none', username: 'u', password: 'p', from: 'no-reply@example.com', fromName: 'Example',
    });
  });

  it('reads ACCESS_TOKEN_CACHE_SIZE from 0 (no cache) to 1000000', () => {
    expect(loadConfig({ ACCESS_TOKEN_CACHE_SIZE: '0' }).jwt.accessTokenCacheSize).toBe(0);
    expect(loadConfig({ ACCESS_TOKEN_CACHE_SIZE: '1000000' }).jwt.accessTokenCacheSize).toBe(1_000_000);
    for (const bad of ['-1', '1000001', 'many', '1.5']) expect(() => loadConfig({ ACCESS_TOKEN_CACHE_SIZE: bad }), bad).toThrow(/ACCESS_TOKEN_CACHE_SIZE/);
  });

  it('reads secrets from NAME_FILE', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cfg-'));
    writeFileSync(path.join(dir, 'pw'), 's3cret\n');
    writeFileSync(path.join(dir, 'db'), 'postgres://u@h/db\n');
    const c = loadConfig({ SMTP_HOST: 'h', SMTP_FROM: 'a@b.c', SMTP_USERNAME: 'u', SMTP_PASSWORD_FILE: path.join(dir, 'pw'), DATABASE_URL_FILE: path.join(dir, 'db') });
    expect(c.smtp?.password).toBe('s3cret');
    expect(c.databaseUrl).toBe('postgres://u@h/db');
  });

  it('reads DATABASE_POOL_MODE: session by default, transaction behind PgBouncer, anything else reported', () => {
    expect(loadConfig({}).databasePoolMode).toBe('session');
    expect(loadConfig({ DATABASE_POOL_MODE: 'transaction' }).databasePoolMode).toBe('transaction');
    expect(() => loadConfig({ DATABASE_POOL_MODE: 'statement' })).toThrow(/DATABASE_POOL_MODE: expected session or transaction, got "statement"/);
  });

  it('reports every bad setting at once', () => {
    let error: unknown;
    try {
      loadConfig({
        PORT: 'eighty',
        DATABASE_URL: 'mysql://x',
        SMTP_HOST: 'h',
        SMTP_TLS: 'ssl',
        LOG_LEVEL: 'loud',
        CORS_ORIGINS: '*',
        TRUST_PROXY: 'maybe',
        ARGON2_MEMORY_KIB: '1024',
        REFRESH_REUSE_GRACE_SECONDS: '301',
        SMTP_PASSWORD_FILE: '/nonexistent/file',
      });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems.join('\n');
    for (const name of ['PORT', 'DATABASE_URL', 'SMTP_TLS', 'SMTP_FROM', 'LOG_LEVEL', 'CORS_ORIGINS', 'TRUST_PROXY', 'ARGON2_MEMORY_KIB', 'REFRESH_REUSE_GRACE_SECONDS', 'SMTP_PASSWORD_FILE']) {
      expect(problems).toContain(name);
    }
    expect((error as ConfigError).problems).toHaveLength(10);
  });

  it('checks the key files at start: readable PEM, RSA, 2048 bits or more', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cfg-keys-'));
    const pem = (type: 'rsa' | 'ec', bits = 2048) => {
      const { privateKey, publicKey } =
        type === 'rsa'
          ? generateKeyPairSync('rsa', { modulusLength: bits, publicKeyEncoding: { type: 'spki', format: 'pem' }, privateKeyEncoding: { type: 'pkcs8', format: 'pem' } })
          : generateKeyPairSync('ec', { namedCurve: 'P-256', publicKeyEncoding: { type: 'spki', format: 'pem' }, privateKeyEncoding: { type: 'pkcs8', format: 'pem' } });
      return { privateKey, publicKey };
    };
    const good = pem('rsa');
    writeFileSync(path.join(dir, 'good.key'), good.privateKey);
    writeFileSync(path.join(dir, 'good.pub'), good.publicKey);
    writeFileSync(path.join(dir, 'small.key'), pem('rsa', 1024).privateKey);
    writeFileSync(path.join(dir, 'ec.pub'), pem('ec').publicKey);
    writeFileSync(path.join(dir, 'junk.pub'), 'not a key');
    expect(loadConfig({ JWT_PRIVATE_KEY_FILE: path.join(dir, 'good.key'), JWT_PUBLIC_KEY_FILES: path.join(dir, 'good.pub') }).jwt.publicKeyFiles).toEqual([path.join(dir, 'good.pub')]);
    let error: ConfigError | undefined;
    try {
      loadConfig({ JWT_PRIVATE_KEY_FILE: path.join(dir, 'small.key'), JWT_PUBLIC_KEY_FILES: ['ec.pub', 'junk.pub', 'missing.pub'].map((f) => path.join(dir, f)).join(',') });
    } catch (err) {
      error = err as ConfigError;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect(error!.problems).toHaveLength(4);
    expect(error!.problems[0]).toMatch(/^JWT_PRIVATE_KEY_FILE: .*at least 2048 bits/);
    expect(error!.problems.slice(1).every((p) => p.startsWith('JWT_PUBLIC_KEY_FILES: '))).toBe(true);
  });

  it('reads the webhook settings: WEBHOOK_ALLOW_PRIVATE_NETWORKS (default false), WEBHOOK_KEY_FILE checked like MFA_KEY_FILE', () => {
    expect(loadConfig({}).webhooks).toEqual({ allowPrivateNetworks: false });
    expect(loadConfig({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }).webhooks).toEqual({ allowPrivateNetworks: true });
    expect(loadConfig({}).webhookKeyFile).toBeUndefined();
    expect(() => loadConfig({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'yes' })).toThrow(/WEBHOOK_ALLOW_PRIVATE_NETWORKS: expected true or false, got "yes"/);
    expect(() => loadConfig({ WEBHOOK_KEY_FILE: '/nonexistent/webhook-key' })).toThrow(/WEBHOOK_KEY_FILE: cannot read \/nonexistent\/webhook-key \(ENOENT\)/);
  });

  it('keeps secrets as given and trims other values', () => {
    const c = loadConfig({ SMTP_HOST: ' mail.example.com ', SMTP_FROM: 'a@b.c', SMTP_USERNAME: 'user', SMTP_PASSWORD: ' pass word ' });
    expect(c.smtp?.host).toBe('mail.example.com');
    expect(c.smtp?.password).toBe(' pass word ');
  });

  it('reads the retention periods (docs/operations.md, "Retention"): defaults, bounds, and dead emails kept at least as long as sent ones', () => {
    expect(loadConfig({}).retention).toEqual({ sessionsDays: 30, verificationCodesDays: 7, outboxDays: 7, outboxDeadDays: 30, webhookDays: 7, webhookDeadDays: 30, adminAuditDays: 365 });
    expect(
      loadConfig({
        RETENTION_SESSIONS_DAYS: '0',
        RETENTION_VERIFICATION_CODES_DAYS: '1',
        RETENTION_OUTBOX_DAYS: '3',
        RETENTION_OUTBOX_DEAD_DAYS: '3650',
        RETENTION_WEBHOOK_DAYS: '0',
        RETENTION_WEBHOOK_DEAD_DAYS: '2',
        RETENTION_ADMIN_AUDIT_DAYS: '30',
      }).retention,
    ).toEqual({ sessionsDays: 0, verificationCodesDays: 1, outboxDays: 3, outboxDeadDays: 3650, webhookDays: 0, webhookDeadDays: 2, adminAuditDays: 30 });
    expect(() => loadConfig({ RETENTION_WEBHOOK_DAYS: '10', RETENTION_WEBHOOK_DEAD_DAYS: '9' })).toThrow(/RETENTION_WEBHOOK_DEAD_DAYS: must be at least RETENTION_WEBHOOK_DAYS \(10\), got 9/);
    expect(Object.isFrozen(loadConfig({}).retention)).toBe(true);

    let error: ConfigError | undefined;
    try {
      loadConfig({ RETENTION_SESSIONS_DAYS: '-1', RETENTION_VERIFICATION_CODES_DAYS: '3651', RETENTION_OUTBOX_DAYS: 'week', RETENTION_OUTBOX_DEAD_DAYS: '0' });
    } catch (err) {
      error = err as ConfigError;
    }
    expect(error).toBeInstanceOf(ConfigError);
    // In the order of README's table (src/settings.ts).
    expect(error!.problems).toEqual([
      'RETENTION_SESSIONS_DAYS: expected an integer from 0 to 3650, got "-1"',
      'RETENTION_VERIFICATION_CODES_DAYS: expected an integer from 0 to 3650, got "3651"',
      'RETENTION_OUTBOX_DAYS: expected an integer from 0 to 3650, got "week"',
      'RETENTION_OUTBOX_DEAD_DAYS: expected an integer from 1 to 3650, got "0"',
    ]);
    expect(() => loadConfig({ RETENTION_OUTBOX_DAYS: '40' })).toThrow(/RETENTION_OUTBOX_DEAD_DAYS: must be at least RETENTION_OUTBOX_DAYS \(40\), got 30/);
    expect(loadConfig({ RETENTION_OUTBOX_DAYS: '40', RETENTION_OUTBOX_DEAD_DAYS: '40' }).retention.outboxDeadDays).toBe(40);
  });
});

describe('loadConfig: PASSWORD_BREACH_CHECK and PASSWORD_BREACH_API_URL (README "Configuration")', () => {
  it('defaults to off with the public Pwned Passwords range endpoint', () => {
    expect(loadConfig({}).passwordBreach).toEqual({ check: 'off', apiUrl: 'https://api.pwnedpasswords.com/range/' });
    expect(Object.isFrozen(loadConfig({}).passwordBreach)).toBe(true);
  });

  it('reads hibp and an http or https range URL ending in /', () => {
    expect(loadConfig({ PASSWORD_BREACH_CHECK: 'hibp' }).passwordBreach).toEqual({ check: 'hibp', apiUrl: 'https://api.pwnedpasswords.com/range/' });
    expect(loadConfig({ PASSWORD_BREACH_CHECK: 'off', PASSWORD_BREACH_API_URL: 'http://127.0.0.1:8080/range/' }).passwordBreach).toEqual({ check: 'off', apiUrl: 'http://127.0.0.1:8080/range/' });
    expect(loadConfig({ PASSWORD_BREACH_CHECK: ' hibp ', PASSWORD_BREACH_API_URL: ' https://hibp.internal.example/ ' }).passwordBreach).toEqual({ check: 'hibp', apiUrl: 'https://hibp.internal.example/' });
  });

  it.each([
    ['a value other than off or hibp', { PASSWORD_BREACH_CHECK: 'on' }, /PASSWORD_BREACH_CHECK: expected off or hibp, got "on"/],
    ['a URL without / at the end', { PASSWORD_BREACH_API_URL: 'https://api.pwnedpasswords.com/range' }, /PASSWORD_BREACH_API_URL: expected a URL ending in \//],
    ['a relative URL', { PASSWORD_BREACH_API_URL: '/range/' }, /PASSWORD_BREACH_API_URL: expected an absolute http:\/\/ or https:\/\/ URL/],
    ['a URL without //', { PASSWORD_BREACH_API_URL: 'https:api.pwnedpasswords.com/range/' }, /PASSWORD_BREACH_API_URL: expected an absolute http:\/\/ or https:\/\/ URL/],
    ['another scheme', { PASSWORD_BREACH_API_URL: 'ftp://example.com/range/' }, /PASSWORD_BREACH_API_URL: expected an absolute http:\/\/ or https:\/\/ URL/],
    ['a query', { PASSWORD_BREACH_API_URL: 'https://example.com/range?x=/' }, /PASSWORD_BREACH_API_URL: expected a URL without a query or fragment/],
  ])('refuses %s', (_name, env, message) => {
    expect(() => loadConfig(env)).toThrow(message);
  });

  it('reports both settings with the other problems at once', () => {
    let error: unknown;
    try {
      loadConfig({ PASSWORD_BREACH_CHECK: 'yes', PASSWORD_BREACH_API_URL: 'not a url', PORT: 'eighty' });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems).toHaveLength(3);
    expect(problems.join('\n')).toMatch(/PASSWORD_BREACH_CHECK[\s\S]*PASSWORD_BREACH_API_URL/);
  });
});

describe('loadConfig: WEBAUTHN_RP_ID, WEBAUTHN_RP_NAME, WEBAUTHN_ORIGINS (docs/integration.md#passkeys)', () => {
  it('defaults to localhost, Latchkey and http://localhost:3000', () => {
    expect(loadConfig({}).webauthn).toEqual({ rpId: 'localhost', rpName: 'Latchkey', origins: ['http://localhost:3000'] });
  });

  it('the default origin follows PORT, so passkeys on the demo page work on any port out of the box', () => {
    expect(loadConfig({ PORT: '3100' }).webauthn.origins).toEqual(['http://localhost:3100']);
    // An origin names no default port (RFC 6454 §6.1): port 80 is http://localhost.
    expect(loadConfig({ PORT: '80' }).webauthn.origins).toEqual(['http://localhost']);
    // Set explicitly, WEBAUTHN_ORIGINS is taken as given, whatever PORT.
    expect(loadConfig({ PORT: '3100', WEBAUTHN_ORIGINS: 'http://localhost:3000' }).webauthn.origins).toEqual(['http://localhost:3000']);
  });

  it('reads a domain and its https origins, subdomains included, comma-separated', () => {
    expect(loadConfig({ WEBAUTHN_RP_ID: 'example.com', WEBAUTHN_RP_NAME: 'Example', WEBAUTHN_ORIGINS: 'https://example.com, https://app.example.com:8443' }).webauthn).toEqual({
      rpId: 'example.com',
      rpName: 'Example',
      origins: ['https://example.com', 'https://app.example.com:8443'],
    });
  });

  it.each([
    ['an RP ID with a scheme', { WEBAUTHN_RP_ID: 'https://example.com', WEBAUTHN_ORIGINS: 'https://example.com' }, /WEBAUTHN_RP_ID: expected a domain/],
    ['an RP ID with a port', { WEBAUTHN_RP_ID: 'example.com:443', WEBAUTHN_ORIGINS: 'https://example.com' }, /WEBAUTHN_RP_ID: expected a domain/],
    ['an origin on another domain', { WEBAUTHN_RP_ID: 'example.com', WEBAUTHN_ORIGINS: 'https://example.org' }, /WEBAUTHN_ORIGINS: "https:\/\/example.org" is not on WEBAUTHN_RP_ID/],
    ['an origin that only ends like the RP ID', { WEBAUTHN_RP_ID: 'example.com', WEBAUTHN_ORIGINS: 'https://badexample.com' }, /is not on WEBAUTHN_RP_ID/],
    ['http:// other than localhost', { WEBAUTHN_RP_ID: 'example.com', WEBAUTHN_ORIGINS: 'http://example.com' }, /WEBAUTHN_ORIGINS: expected origins/],
    ['an origin with a path', { WEBAUTHN_ORIGINS: 'http://localhost:3000/app' }, /WEBAUTHN_ORIGINS: expected origins/],
    ['an origin with a trailing slash', { WEBAUTHN_ORIGINS: 'http://localhost:3000/' }, /WEBAUTHN_ORIGINS: expected origins/],
    ['no origin', { WEBAUTHN_ORIGINS: ' , ' }, /WEBAUTHN_ORIGINS: at least one origin/],
  ])('refuses %s', (_name, env, message) => {
    expect(() => loadConfig(env)).toThrow(message);
  });
});

describe('loadConfig: ADMIN_HOST, ADMIN_PORT, RATE_LIMIT_ADMIN_PER_KEY (docs/admin-api.md)', () => {
  it('has no admin API by default; ADMIN_HOST defaults to 127.0.0.1, not HOST', () => {
    expect(loadConfig({}).admin).toEqual({ host: '127.0.0.1', port: undefined });
    expect(loadConfig({ HOST: '0.0.0.0', ADMIN_PORT: '3001' }).admin).toEqual({ host: '127.0.0.1', port: 3001 });
    expect(loadConfig({ ADMIN_HOST: '10.0.0.5', ADMIN_PORT: '3001' }).admin).toEqual({ host: '10.0.0.5', port: 3001 });
    expect(loadConfig({}).rateLimits.adminPerKey).toBe(600);
    expect(loadConfig({ RATE_LIMIT_ADMIN_PER_KEY: '0' }).rateLimits.adminPerKey).toBe(0);
  });

  it.each([
    ['the public port', { ADMIN_PORT: '3000' }, /ADMIN_PORT: must differ from PORT \(3000\)/],
    ['PORT as set', { PORT: '8080', ADMIN_PORT: '8080' }, /ADMIN_PORT: must differ from PORT \(8080\)/],
    ['the metrics port', { METRICS_PORT: '9464', ADMIN_PORT: '9464' }, /ADMIN_PORT: must differ from METRICS_PORT \(9464\)/],
    ['a port out of range', { ADMIN_PORT: '70000' }, /ADMIN_PORT: expected an integer from 0 to 65535/],
    ['not a number', { ADMIN_PORT: 'admin' }, /ADMIN_PORT: expected an integer/],
  ])('refuses to start with ADMIN_PORT on %s', (_name, env, message) => {
    expect(() => loadConfig(env)).toThrow(message);
  });
});
