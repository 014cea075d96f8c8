import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildApp, createLogger } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { uniqueName } from '../helpers/flows.js';

/**
 * User enumeration (ASVS 5.0 V6.3.8): sign-in with an unknown identifier and with a wrong
 * password must not differ in status, body or time. This suite uses the production argon2id
 * parameters (m=19456 KiB, t=2, p=1), so the hash dominates both paths as it does in production.
 */
const ROUNDS = 30;
/** Largest accepted relative difference of the two median times: well below the cost of one hash, which is what a leak would add or remove. */
const TOLERANCE = 0.25;

let database: TestDatabase;
let app: FastifyInstance;
const username = uniqueName('timing');
const password = 'a perfectly good passphrase';
const dataDir = mkdtempSync(path.join(tmpdir(), 'auth-enumeration-'));

beforeAll(async () => {
  database = await createTestDatabase();
  const config = loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent', RATE_LIMIT_SIGN_IN_PER_IDENTIFIER: '0', RATE_LIMIT_SIGN_IN_PER_IP: '0' });
  app = await buildApp({ config, db: database.db, logger: createLogger('silent'), startOutboxWorker: false });
  const res = await app.inject({ method: 'POST', url: '/auth/v0/sign-up', payload: { username, phone: '+15550004321', password } });
  expect(res.statusCode).toBe(201);
});
afterAll(async () => {
  await app.close();
  await database.drop();
  rmSync(dataDir, { recursive: true, force: true });
});

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};

async function timedSignIn(body: Record<string, string>) {
  const start = process.hrtime.bigint();
  const res = await app.inject({ method: 'POST', url: '/auth/v0/sign-in', payload: body });
  return { res, ms: Number(process.hrtime.bigint() - start) / 1e6 };
}

describe('sign-in does not reveal which users exist', () => {
  it('unknown identifier and wrong password: same status, same body, same time within noise', async () => {
    const unknown: number[] = [];
    const wrong: number[] = [];
    // Warm-up, then interleave the two paths so machine drift affects both alike.
    await timedSignIn({ username, password: 'warm up the hasher' });
    for (let i = 0; i < ROUNDS; i++) {
      const a = await timedSignIn({ username: uniqueName('nobody'), password: 'some wrong password' });
      const b = await timedSignIn({ username, password: 'some wrong password' });
      expect(a.res.statusCode).toBe(401);
      expect(b.res.statusCode).toBe(401);
      expect(a.res.body).toBe(b.res.body);
      unknown.push(a.ms);
      wrong.push(b.ms);
    }
    const mu = median(unknown);
    const mw = median(wrong);
    // Both paths really include an argon2id verification (several ms), not a shortcut.
    expect(Math.min(mu, mw)).toBeGreaterThan(2);
    expect(Math.abs(mu - mw) / Math.max(mu, mw), `median unknown ${mu.toFixed(2)} ms, wrong password ${mw.toFixed(2)} ms`).toBeLessThan(TOLERANCE);
  });
});
