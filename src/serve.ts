import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { buildApp, createLogger } from './app.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import type { DataDirLockedError } from './db/data-dir-lock.js';
import { prepareSchema, type PreparedSchema } from './db/migrate.js';
import { openDatabase } from './db/open.js';
import { listenMetrics } from './plugins/metrics.js';

/** PostgreSQL's default port (what a DATABASE_URL without one connects to), for the start's log line. */
const POSTGRES_DEFAULT_PORT = 5432;
/** The port an origin without one is on (RFC 6454 §4: the scheme's default port). */
const HTTPS_DEFAULT_PORT = 443;
const HTTP_DEFAULT_PORT = 80;

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
 * HOST:PORT (and METRICS_PORT, and ADMIN_HOST:ADMIN_PORT for the admin API, when set). SIGTERM and SIGINT close the server, the outbox worker and the database, and exit
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
  // One logger from the start, so that what a first start does (creating the embedded database,
  // migrating, generating keys: some seconds) is told as it happens, then the app's log.
  const log = createLogger(config.logLevel);
  if (config.databaseUrl !== undefined) {
    const server = postgresLocation(config.databaseUrl);
    log.info({ database: 'postgres', server }, `using PostgreSQL at ${server}`);
  }
  const opening = performance.now();
  // On PGlite, this takes DATA_DIR's lock first: a second process is refused here
  // (DataDirLockedError) before it logs anything; then it says it creates or opens the database.
  const db = await openDatabase(config, 'serve', log);
  if (config.databaseUrl === undefined) log.info({ database: 'pglite', ms: Math.round(performance.now() - opening) }, 'embedded database opened');
  let app: FastifyInstance | undefined;
  try {
    // Preparing the schema (mostly waiting for the database) and building the app (CPU: route
    // schemas, keys) overlap; buildApp touches no table and nothing serves before both are done
    // (the outbox worker and the rate-limit purge start when the app is ready, at listen).
    const [schema, built] = await Promise.allSettled([prepareSchema(db, { migrateOnStart: config.migrateOnStart }), buildApp({ config, db, logger: log })]);
    if (built.status === 'fulfilled') app = built.value;
    if (schema.status === 'rejected') throw schema.reason;
    if (built.status === 'rejected') throw built.reason;
    log.info({ schemaVersion: schema.value.current, applied: schema.value.applied }, schemaMessage(schema.value));
    const running = built.value;
    if (config.smtp === undefined) {
      log.warn('SMTP is not configured (SMTP_HOST unset): emails, verification codes included, are written to this log. Do not run like this in production.');
    }
    if (config.databaseUrl !== undefined) {
      if (config.jwt.privateKeyFile === undefined) {
        log.warn('DATABASE_URL is set but JWT_PRIVATE_KEY_FILE is not: this instance signs with a key generated into its own DATA_DIR, which other instances will not accept. Give every instance the same JWT_PRIVATE_KEY_FILE.');
      }
      if (config.mfaKeyFile === undefined) {
        log.warn('DATABASE_URL is set but MFA_KEY_FILE is not: TOTP secrets are encrypted under a key generated into this instance\'s DATA_DIR, which other instances cannot read. Give every instance the same MFA_KEY_FILE.');
      }
      if (config.webhookKeyFile === undefined) {
        log.warn('DATABASE_URL is set but WEBHOOK_KEY_FILE is not: webhook secrets are encrypted under a key generated into this instance\'s DATA_DIR, which other instances (and the CLI elsewhere) cannot read. Give every instance the same WEBHOOK_KEY_FILE.');
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
    const demoWarning = demoPageOriginWarning(config, (running.server.address() as AddressInfo).port);
    if (demoWarning !== undefined) log.warn(demoWarning);
    // METRICS_PORT: GET /metrics on a listener of its own (closed with the app).
    if (config.metricsPort !== undefined) await listenMetrics(running, { host: config.host, port: config.metricsPort });
    // ADMIN_PORT: the admin API on a listener of its own (closed with the app), never on PORT.
    if (running.admin !== null && config.admin.port !== undefined) {
      await running.admin.listen({ host: config.admin.host, port: config.admin.port });
      const address = running.admin.server.address() as AddressInfo;
      log.info({ adminHost: config.admin.host, adminPort: address.port }, `admin API listening on ${config.admin.host}:${address.port} (docs/admin-api.md)`);
    }
    return running;
  } catch (err) {
    await app?.close().catch(() => undefined);
    await db.close();
    throw err;
  }
}

/**
 * `host:port/database` of a DATABASE_URL, for the log: never the user name or password.
 * An unparseable URL (loadConfig has checked the scheme only) is `(unparseable URL)`.
 */
function postgresLocation(databaseUrl: string): string {
  try {
    const url = new URL(databaseUrl);
    return `${url.hostname}:${url.port === '' ? POSTGRES_DEFAULT_PORT : url.port}${url.pathname}`;
  } catch {
    return '(unparseable URL)';
  }
}

/** The start's line about the schema: the migrations applied and the version reached, or that it was current. */
function schemaMessage(schema: PreparedSchema): string {
  const { applied, current } = schema;
  if (applied.length === 0) return `database schema is current (version ${current})`;
  const versions = applied.length === 1 ? `migration ${applied[0]}` : `migrations ${applied[0]} to ${applied[applied.length - 1]}`;
  return `applied ${versions}: database schema at version ${current}`;
}

/**
 * The warning of a start with the demo page on (DEMO_PAGE=true) whose WEBAUTHN_ORIGINS names no
 * origin on the port it listens on: passkeys on the demo page, opened there, would be refused
 * for their origin (docs/api.md#passkeys). Undefined when the demo page is off or an origin is
 * on `port` (an origin without a port is on 443 for https and 80 for http, RFC 6454 §4).
 */
export function demoPageOriginWarning(config: Pick<Config, 'demoPage' | 'webauthn' | 'port'>, port: number): string | undefined {
  if (!config.demoPage) return undefined;
  const onPort = config.webauthn.origins.some((origin) => {
    const url = new URL(origin);
    return Number(url.port === '' ? (url.protocol === 'https:' ? HTTPS_DEFAULT_PORT : HTTP_DEFAULT_PORT) : url.port) === port;
  });
  if (onPort) return undefined;
  return (
    `DEMO_PAGE=true, but WEBAUTHN_ORIGINS (${config.webauthn.origins.join(', ')}) names no origin on port ${port}: ` +
    `passkeys on the demo page at http://localhost:${port}/auth/v0/demo will be refused for their origin. ` +
    (config.port === 0
      ? `PORT=0 picks a new port at every start: give PORT a fixed value (the default WEBAUTHN_ORIGINS follows it), or add http://localhost:${port} to WEBAUTHN_ORIGINS.`
      : `Add http://localhost:${port} to WEBAUTHN_ORIGINS, or leave it unset (it then follows PORT).`)
  );
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
