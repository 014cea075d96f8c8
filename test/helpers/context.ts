import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { buildApp, createLogger, type AppDeps } from '../../src/app.js';
import { loadConfig, type Config } from '../../src/config.js';
import { createPasswordHasher, type PasswordHasher } from '../../src/crypto/password.js';
import type { Db } from '../../src/db/db.js';
import { TestClock } from './clock.js';
import { createTestDatabase, type TestDatabase } from './database.js';
import { startSmtpServer, type TestSmtpServer } from './smtp.js';

/** Cheap argon2id parameters for tests (production enforces at least OWASP's m=19456, t=2, p=1). */
export const TEST_ARGON2 = { memoryCost: 256, timeCost: 1, parallelism: 1 } as const;

let sharedHasher: Promise<PasswordHasher> | undefined;

/** The password hasher every test context's app uses (argon2id with TEST_ARGON2), made once per worker. */
export function testPasswordHasher(): Promise<PasswordHasher> {
  sharedHasher ??= createPasswordHasher(TEST_ARGON2);
  return sharedHasher;
}

/** Everything a test file needs: the app (same buildApp and Ajv options as production), its database, clock, SMTP server and log. */
export interface TestContext {
  readonly app: FastifyInstance;
  readonly db: Db;
  readonly database: TestDatabase;
  readonly clock: TestClock;
  readonly smtp: TestSmtpServer;
  readonly config: Config;
  /** Every log line the app wrote, parsed. */
  readonly logs: Record<string, unknown>[];
  /** Every log line, raw, for "no secret appears" checks. */
  readonly rawLogs: string[];
  close(): Promise<void>;
}

/**
 * Builds a test context: fresh database (PGlite, or PostgreSQL under TEST_DB=postgres), a real
 * SMTP server on loopback wired through SMTP_* settings, a controllable clock, cheap argon2id.
 * @param env extra environment settings for loadConfig.
 * @param options.startOutboxWorker false leaves queued emails in the outbox (default true).
 * @param options.clock the service's clock (default a TestClock that moves only when told to).
 * @param options.startWebhookWorker false leaves webhook deliveries to `app.webhookDelivery.runOnce()` (default true).
 * @param options.webhookDelivery how webhook hosts resolve and an attempt's time limit (AppDeps).
 */
export async function createTestContext(
  env: Record<string, string> = {},
  options: { startOutboxWorker?: boolean; clock?: TestClock; startWebhookWorker?: boolean; webhookDelivery?: AppDeps['webhookDelivery'] } = {},
): Promise<TestContext> {
  const database = await createTestDatabase();
  const smtp = await startSmtpServer();
  const dataDir = mkdtempSync(path.join(tmpdir(), 'auth-test-'));
  const config = loadConfig({
    DATA_DIR: dataDir,
    SMTP_HOST: '127.0.0.1',
    SMTP_PORT: String(smtp.port),
    SMTP_TLS: 'none',
    SMTP_FROM: 'auth@example.test',
    SMTP_FROM_NAME: 'Auth Test',
    LOG_LEVEL: 'info',
    // Every test signs up and fails sign-ins from 127.0.0.1; the limits are off unless a test
    // sets them (test/http/rate-limits.test.ts does).
    RATE_LIMIT_SIGN_IN_PER_IDENTIFIER: '0',
    RATE_LIMIT_SIGN_IN_PER_IP: '0',
    RATE_LIMIT_SIGN_UP_PER_IP: '0',
    RATE_LIMIT_SIGN_IN_PER_ACCOUNT: '0',
    RATE_LIMIT_VERIFY_PER_IP: '0',
    RATE_LIMIT_RESEND_PER_IP: '0',
    ...env,
  });
  const clock = options.clock ?? new TestClock();
  const rawLogs: string[] = [];
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      const line = chunk.toString('utf8');
      rawLogs.push(line);
      try {
        logs.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        /* not JSON: kept raw only */
      }
      done();
    },
  });
  const app = await buildApp({
    config,
    db: database.db,
    clock,
    passwordHasher: await testPasswordHasher(),
    logger: createLogger(config.logLevel, sink),
    ...(options.startOutboxWorker === undefined ? {} : { startOutboxWorker: options.startOutboxWorker }),
    ...(options.startWebhookWorker === undefined ? {} : { startWebhookWorker: options.startWebhookWorker }),
    ...(options.webhookDelivery === undefined ? {} : { webhookDelivery: options.webhookDelivery }),
  });
  await app.ready();
  return {
    app,
    db: database.db,
    database,
    clock,
    smtp,
    config,
    logs,
    rawLogs,
    async close() {
      await app.close();
      await smtp.close();
      await database.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
