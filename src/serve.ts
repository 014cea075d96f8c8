import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import { ConfigError, loadConfig } from './config.js';
import type { DataDirLockedError } from './db/data-dir-lock.js';
import { prepareSchema } from './db/migrate.js';
import { openDatabase } from './db/open.js';
import { listenMetrics } from './plugins/metrics.js';

/** How long a graceful shutdown may take before the process exits anyway, in milliseconds. */
export const SHUTDOWN_TIMEOUT_MS = 10_000;

/** Process exit code when the service cannot start or does not shut down cleanly. */
const EXIT_FAILURE = 1;
/** Process exit code after a clean shutdown. */
const EXIT_OK = 0;

/**
 * Starts the service, as `npm start` (`main.ts`) and `latchkey serve` (`cli.ts`) both do:
 * configuration from `env`, the database, migrations (unless MIGRATE_ON_START=false, in which
 * case a schema that is behind stops the start, docs/operations.md), the app, then listen on
 * HOST:PORT. SIGTERM and SIGINT close the server, the outbox worker and the database, and exit
 * the process with 0 (1 when closing fails or takes over {@link SHUTDOWN_TIMEOUT_MS}).
 *
 * @param env the environment, `process.env` by default.
 * @returns the listening app, once it listens.
 * @throws {ConfigError} for a bad configuration; {@link DataDirLockedError} when another
 *   process holds the embedded database's DATA_DIR; the database's or the schema's error
 *   (`SchemaBehindError`) when it cannot be prepared; the listen error (port taken). The
 *   database is closed again in each case. Callers print it with {@link exitOnStartFailure}.
 */
export async function serve(env: Readonly<Record<string, string | undefined>> = process.env): Promise<FastifyInstance> {
  const config = loadConfig(env);
  // On PGlite, this takes DATA_DIR's lock first: a second process is refused here (DataDirLockedError).
  const db = await openDatabase(config, 'serve');
  let app: FastifyInstance | undefined;
  try {
    // Preparing the schema (mostly waiting for the database) and building the app (CPU: route
    // schemas, keys) overlap; buildApp touches no table and nothing serves before both are done
    // (the outbox worker and the rate-limit purge start when the app is ready, at listen).
    const [schema, built] = await Promise.allSettled([prepareSchema(db, { migrateOnStart: config.migrateOnStart }), buildApp({ config, db })]);
    if (built.status === 'fulfilled') app = built.value;
    if (schema.status === 'rejected') throw schema.reason;
    if (built.status === 'rejected') throw built.reason;
    const running = built.value;
    const log = running.log;
    if (config.smtp === undefined) {
      log.warn('SMTP is not configured (SMTP_HOST unset): emails, verification codes included, are written to this log. Do not run like this in production.');
    }
    if (config.databaseUrl === undefined) log.info({ dataDir: config.dataDir }, 'using the embedded PGlite database');
    else {
      if (config.jwt.privateKeyFile === undefined) {
        log.warn('DATABASE_URL is set but JWT_PRIVATE_KEY_FILE is not: this instance signs with a key generated into its own DATA_DIR, which other instances will not accept. Give every instance the same JWT_PRIVATE_KEY_FILE.');
      }
      if (config.mfaKeyFile === undefined) {
        log.warn('DATABASE_URL is set but MFA_KEY_FILE is not: TOTP secrets are encrypted under a key generated into this instance\'s DATA_DIR, which other instances cannot read. Give every instance the same MFA_KEY_FILE.');
      }
    }

    let closing = false;
    const shutdown = (signal: string): void => {
      if (closing) return;
      closing = true;
      log.info({ signal }, 'shutting down');
      const timer = setTimeout(() => process.exit(EXIT_FAILURE), SHUTDOWN_TIMEOUT_MS);
      timer.unref();
      running
        .close()
        .then(() => db.close())
        .then(() => process.exit(EXIT_OK))
        .catch((err: unknown) => {
          log.error({ err }, 'shutdown failed');
          process.exit(EXIT_FAILURE);
        });
    };
    process.on('SIGTERM', () => shutdown('SIGTERM'));
    process.on('SIGINT', () => shutdown('SIGINT'));

    await running.listen({ host: config.host, port: config.port });
    // METRICS_PORT: GET /metrics on a listener of its own (closed with the app).
    if (config.metricsPort !== undefined) await listenMetrics(running, { host: config.host, port: config.metricsPort });
    return running;
  } catch (err) {
    await app?.close().catch(() => undefined);
    await db.close();
    throw err;
  }
}

/**
 * Prints why the service could not start to stderr and exits 1: a {@link ConfigError} as its
 * list of bad settings, anything else (a {@link DataDirLockedError} naming who holds DATA_DIR,
 * for one) as `latchkey failed to start: <message>`, without a stack trace.
 */
export function exitOnStartFailure(err: unknown): never {
  if (err instanceof ConfigError) process.stderr.write(`${err.message}\n`);
  else process.stderr.write(`latchkey failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(EXIT_FAILURE);
}
