import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { buildApp, createLogger } from '../../../src/app.js';
import { loadConfig } from '../../../src/config.js';
import { createPasswordHasher } from '../../../src/crypto/password.js';
import type { Db } from '../../../src/db/db.js';
import { TestClock } from '../../helpers/clock.js';
import { TEST_ARGON2, type TestContext } from '../../helpers/context.js';
import type { TestDatabase } from '../../helpers/database.js';
import { startSmtpServer, type TestSmtpServer } from '../../helpers/smtp.js';

/** Options of {@link createAppContext}. */
export interface AppContextOptions {
  /** The test database (assertions read it directly through `database.db`). */
  readonly database: TestDatabase;
  /** The database the app uses; defaults to `database.db`. A second pool, or a pool through a proxy. */
  readonly db?: Db;
  /** SMTP server the app sends to; defaults to a fresh plain one, closed with the context. */
  readonly smtp?: TestSmtpServer;
  /** DATA_DIR (generated signing key); defaults to a fresh temp dir. Instances that share it share the key. */
  readonly dataDir?: string;
  readonly clock?: TestClock;
  /** Extra settings for loadConfig. */
  readonly env?: Record<string, string>;
  /** Start the outbox worker (default false: tests drive it with `runOnce()`). */
  readonly startOutboxWorker?: boolean;
}

/**
 * A {@link TestContext} (so the helpers of test/helpers/flows.ts work with it) around an app
 * built like test/helpers/context.ts builds one (cheap argon2id, rate limits off unless `env`
 * sets them, logs captured), but on a database, SMTP server, clock and DATA_DIR the caller may
 * share between several instances. `close()` closes the app and what the context created
 * itself; the caller drops the database and closes what it passed in.
 */
export async function createAppContext(options: AppContextOptions): Promise<TestContext> {
  const ownSmtp = options.smtp === undefined ? await startSmtpServer() : undefined;
  const smtp = options.smtp ?? ownSmtp!;
  const ownDataDir = options.dataDir === undefined ? mkdtempSync(path.join(tmpdir(), 'auth-rel-')) : undefined;
  const config = loadConfig({
    DATA_DIR: options.dataDir ?? ownDataDir!,
    SMTP_HOST: '127.0.0.1',
    SMTP_PORT: String(smtp.port),
    SMTP_TLS: 'none',
    SMTP_FROM: 'auth@example.test',
    LOG_LEVEL: 'info',
    RATE_LIMIT_SIGN_IN_PER_IDENTIFIER: '0',
    RATE_LIMIT_SIGN_IN_PER_IP: '0',
    RATE_LIMIT_SIGN_UP_PER_IP: '0',
    RATE_LIMIT_SIGN_IN_PER_ACCOUNT: '0',
    RATE_LIMIT_VERIFY_PER_IP: '0',
    RATE_LIMIT_RESEND_PER_IP: '0',
    ...options.env,
  });
  const rawLogs: string[] = [];
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      const line = chunk.toString('utf8');
      rawLogs.push(line);
      try {
        logs.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        /* kept raw only */
      }
      done();
    },
  });
  const clock = options.clock ?? new TestClock();
  const db = options.db ?? options.database.db;
  const app = await buildApp({
    config,
    db,
    clock,
    passwordHasher: await createPasswordHasher(TEST_ARGON2),
    logger: createLogger(config.logLevel, sink),
    startOutboxWorker: options.startOutboxWorker ?? false,
  });
  await app.ready();
  return {
    app,
    db: options.database.db,
    database: options.database,
    clock,
    smtp,
    config,
    logs,
    rawLogs,
    async close() {
      await app.close();
      await ownSmtp?.close();
      if (ownDataDir !== undefined) rmSync(ownDataDir, { recursive: true, force: true });
    },
  };
}

/** True when this run's project is PostgreSQL (TEST_DB=postgres, see vitest.reliability.config.ts). */
export const ON_POSTGRES = process.env.TEST_DB === 'postgres';
