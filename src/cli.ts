#!/usr/bin/env node
import { ConfigError, loadConfig } from './config.js';
import { migrate, schemaStatus } from './db/migrate.js';
import { openDatabase } from './db/open.js';
import { runKeysCommand } from './modules/keys/keys.cli.js';

const USAGE = `Usage: auth-service <command>

Commands:
  migrate        apply pending database migrations and exit (DATABASE_URL, or the embedded database in DATA_DIR)
  keys generate  write a new RSA signing key pair [--out DIR] [--bits N]; see "auth-service keys generate --help"
`;

/** `auth-service migrate`: applies pending migrations (decisions.md §1) and reports the schema version. */
async function runMigrate(): Promise<void> {
  const config = loadConfig(process.env);
  const db = await openDatabase(config);
  try {
    const applied = await migrate(db);
    const status = await schemaStatus(db);
    process.stdout.write(
      applied.length === 0
        ? `Schema is current (version ${status.current}).\n`
        : `Applied migrations ${applied.join(', ')}; schema is at version ${status.current}.\n`,
    );
  } finally {
    await db.close();
  }
}

async function cli(argv: string[]): Promise<number> {
  const [command] = argv;
  if (command === 'migrate') {
    await runMigrate();
    return 0;
  }
  if (command === 'keys') {
    return runKeysCommand(argv.slice(1), {
      env: process.env,
      stdout: (text) => process.stdout.write(text),
      stderr: (text) => process.stderr.write(text),
    });
  }
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(USAGE);
    return command === undefined ? 1 : 0;
  }
  process.stderr.write(`Unknown command "${command}".\n${USAGE}`);
  return 1;
}

cli(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`${err instanceof ConfigError || err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
