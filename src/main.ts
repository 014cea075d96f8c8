import { buildApp } from './app.js';
import { ConfigError, loadConfig } from './config.js';
import { prepareSchema } from './db/migrate.js';
import { openDatabase } from './db/open.js';

/** How long a graceful shutdown may take before the process exits anyway, in milliseconds. */
const SHUTDOWN_TIMEOUT_MS = 10_000;

/**
 * Starts the service: configuration, database, migrations (unless MIGRATE_ON_START=false, in
 * which case a schema that is behind stops the start), the app, then listen. SIGTERM and
 * SIGINT close the server, the outbox worker and the database, and exit 0.
 */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  const db = await openDatabase(config);
  try {
    await prepareSchema(db, { migrateOnStart: config.migrateOnStart });
  } catch (err) {
    await db.close();
    throw err;
  }
  const app = await buildApp({ config, db });
  if (config.smtp === undefined) {
    app.log.warn('SMTP is not configured (SMTP_HOST unset): emails, verification codes included, are written to this log. Do not run like this in production.');
  }
  if (config.databaseUrl === undefined) app.log.info({ dataDir: config.dataDir }, 'using the embedded PGlite database');
  else if (config.jwt.privateKeyFile === undefined) {
    app.log.warn('DATABASE_URL is set but JWT_PRIVATE_KEY_FILE is not: this instance signs with a key generated into its own DATA_DIR, which other instances will not accept. Give every instance the same JWT_PRIVATE_KEY_FILE.');
  }

  let closing = false;
  const shutdown = (signal: string): void => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, 'shutting down');
    const timer = setTimeout(() => process.exit(1), SHUTDOWN_TIMEOUT_MS);
    timer.unref();
    app
      .close()
      .then(() => db.close())
      .then(() => process.exit(0))
      .catch((err: unknown) => {
        app.log.error({ err }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));

  await app.listen({ host: config.host, port: config.port });
}

main().catch((err: unknown) => {
  process.stderr.write(`auth-service failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
