import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildApp, createLogger } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createPasswordHasher } from '../../src/crypto/password.js';
import { migrate } from '../../src/db/migrate.js';
import { openDatabase } from '../../src/db/open.js';
import { GENERATED_KEY_FILE } from '../../src/modules/keys/keys.service.js';
import { TEST_ARGON2 } from '../helpers/context.js';
import { PGLITE_FROM_EMPTY_TIMEOUT_MS } from '../helpers/database.js';

const dataDir = mkdtempSync(path.join(tmpdir(), 'auth-restart-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

/** Starts the service the way main.ts does with zero configuration: embedded database and generated key in DATA_DIR. */
async function start() {
  const config = loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent' });
  const db = await openDatabase(config);
  await migrate(db);
  const app = await buildApp({ config, db, passwordHasher: await createPasswordHasher(TEST_ARGON2), logger: createLogger('silent') });
  return { app, db, stop: async () => (await app.close(), await db.close()) };
}

/** Each start opens a file-backed PGlite in DATA_DIR; the first runs its initdb and every migration, and generates an RSA key. */
const START_TIMEOUT_MS = PGLITE_FROM_EMPTY_TIMEOUT_MS;

describe('zero-configuration start (docs/operations.md)', () => {
  it('keeps users, sessions and the signing key in DATA_DIR: tokens stay valid across restarts', async () => {
    const first = await start();
    const signUp = await first.app.inject({ method: 'POST', url: '/auth/v0/sign-up', payload: { username: 'restart_user', phone: '+15550001111', password: 'a long enough password' } });
    expect(signUp.statusCode).toBe(201);
    const signIn = await first.app.inject({ method: 'POST', url: '/auth/v0/sign-in', payload: { username: 'restart_user', password: 'a long enough password' } });
    expect(signIn.statusCode).toBe(200);
    const token = signIn.json().tokens.access_token as string;
    const jwksBefore = (await first.app.inject({ method: 'GET', url: '/auth/v0/.well-known/jwks.json' })).json();
    await first.stop();

    const keyFile = path.join(dataDir, GENERATED_KEY_FILE);
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);

    const second = await start();
    try {
      const me = await second.app.inject({ method: 'GET', url: '/auth/v0/me', headers: { authorization: `Bearer ${token}` } });
      expect(me.statusCode).toBe(200);
      expect(me.json().user.username).toBe('restart_user');
      const jwksAfter = (await second.app.inject({ method: 'GET', url: '/auth/v0/.well-known/jwks.json' })).json();
      expect(jwksAfter).toEqual(jwksBefore);
      expect(jwksAfter.keys[0].n.length).toBeGreaterThanOrEqual(342); // 2048-bit modulus in base64url
    } finally {
      await second.stop();
    }
  }, START_TIMEOUT_MS);

  it('serves real HTTP on 127.0.0.1 with the refresh cookie in Set-Cookie only', async () => {
    const svc = await start();
    try {
      const address = await svc.app.listen({ host: '127.0.0.1', port: 0 });
      const res = await fetch(`${address}/auth/v0/sign-in`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username: 'restart_user', password: 'a long enough password' }),
      });
      expect(res.status).toBe(200);
      const cookie = res.headers.get('set-cookie') ?? '';
      const token = /^refresh_token=([^;]+);/.exec(cookie)?.[1];
      expect(token).toMatch(/^[A-Za-z0-9_-]{64}$/);
      expect(cookie).toContain('Path=/auth/v0/refresh');
      expect(await res.text()).not.toContain(token!);
      const refreshed = await fetch(`${address}/auth/v0/refresh`, { method: 'POST', headers: { cookie: `refresh_token=${token}` } });
      expect(refreshed.status).toBe(200);
    } finally {
      await svc.stop();
    }
  }, START_TIMEOUT_MS);
});
