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
 * User enumeration (OWASP ASVS 5.0 V6.3.8) through a password-reset request
 * (docs/api.md#request-a-password-reset): a known and an unknown address get the same status,
 * body and time. Production argon2id parameters, as in test/http/enumeration.test.ts.
 */
const ROUNDS = 40;
/** Largest accepted relative difference of the two median times. */
const TOLERANCE = 0.25;
/**
 * Differences below this many milliseconds pass whatever their ratio: the answer itself takes
 * about 1.5 ms on PGlite, so scheduling noise on a busy machine can reach 25 %. Doing the lookup
 * and the code inside the request (the leak this test guards against) added about 2.7 ms.
 */
const NOISE_FLOOR_MS = 0.5;

let database: TestDatabase;
let app: FastifyInstance;
const known: string[] = [];
const dataDir = mkdtempSync(path.join(tmpdir(), 'auth-reset-timing-'));

beforeAll(async () => {
  database = await createTestDatabase();
  const config = loadConfig({ DATA_DIR: dataDir, LOG_LEVEL: 'silent', RATE_LIMIT_SIGN_UP_PER_IP: '0', RATE_LIMIT_PASSWORD_RESET_PER_IP: '0' });
  app = await buildApp({ config, db: database.db, logger: createLogger('silent'), startOutboxWorker: false });
  for (let i = 0; i <= ROUNDS; i++) {
    const username = uniqueName('timing');
    const res = await app.inject({ method: 'POST', url: '/auth/v0/sign-up', payload: { username, email: `${username}@example.test`, password: 'a perfectly good passphrase' } });
    expect(res.statusCode).toBe(201);
    known.push(`${username}@example.test`);
  }
}, 60_000);
afterAll(async () => {
  await app.close();
  await database.drop();
  rmSync(dataDir, { recursive: true, force: true });
});

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};

async function timedRequest(email: string) {
  const start = process.hrtime.bigint();
  const res = await app.inject({ method: 'POST', url: '/auth/v0/password-reset', payload: { email } });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  // The request's work (the outbox worker's) finishes before the next one starts, so it slows neither.
  await app.outbox.runOnce();
  return { res, ms };
}

describe('a password-reset request does not reveal which addresses have an account', () => {
  it('known and unknown address: same status, same body, same time within noise', async () => {
    const unknownTimes: number[] = [];
    const knownTimes: number[] = [];
    await timedRequest(known[ROUNDS]!);
    for (let i = 0; i < ROUNDS; i++) {
      const a = await timedRequest(`${uniqueName('nobody')}@example.test`);
      const b = await timedRequest(known[i]!);
      expect(a.res.statusCode).toBe(204);
      expect(b.res.statusCode).toBe(204);
      expect(a.res.body).toBe(b.res.body);
      expect(a.res.headers['content-length']).toBe(b.res.headers['content-length']);
      unknownTimes.push(a.ms);
      knownTimes.push(b.ms);
    }
    const mu = median(unknownTimes);
    const mk = median(knownTimes);
    const allowed = Math.max(TOLERANCE * Math.max(mu, mk), NOISE_FLOOR_MS);
    expect(Math.abs(mu - mk), `median unknown ${mu.toFixed(2)} ms, known ${mk.toFixed(2)} ms`).toBeLessThan(allowed);
    // The known addresses really got a code (the work happened, after the answer).
    const { rows } = await database.db.query<{ n: number }>("SELECT count(*)::int AS n FROM verification_codes WHERE purpose = 'password_reset'");
    expect(rows[0]!.n).toBe(ROUNDS + 1);
  });
});
