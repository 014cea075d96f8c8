#!/usr/bin/env node
import { EXIT_ERROR, EXIT_OK, EXIT_USAGE, wantsHelp, type DatabaseCommandIo } from './cli-support.js';

// Each command's module is imported when the command runs, so `--help` and `keys generate` do
// not load the web framework and the database drivers.

const USAGE = `Usage: latchkey [command] [options]

Commands:
  serve                     start the service (the default when no command is given)
  migrate                   apply pending database migrations and exit
  keys generate             write a new RSA signing key pair [--out DIR] [--bits N]
  outbox list               show email outbox rows [--status pending|sent|dead|cancelled] [--limit N]
  outbox retry              put dead outbox rows back to pending <id> | --all-dead
  sessions revoke           revoke every active session of a user --user <id|username>
  users delete              delete a user's account and everything it owns --user <id|username>
  admin-keys create         make an admin API key --name NAME --scopes SCOPE,SCOPE [--expires-in-days N]
  admin-keys list           show the admin API keys (never the keys themselves)
  admin-keys revoke         stop an admin API key at once <id>
  webhooks <command>        manage webhook endpoints: add, list, update, remove, rotate-secret,
                            deliveries, retry (see "latchkey webhooks --help")

Every command reads the service's configuration from the environment (README, "Configuration")
and takes --help. Exit codes: 0 success, 1 failure, 2 bad usage.
`;

const SERVE_USAGE = `Usage: latchkey serve

Starts the service, as "npm start" does: configuration from the environment (README,
"Configuration"), pending migrations applied unless MIGRATE_ON_START=false, listening on
HOST:PORT. SIGTERM or SIGINT shuts it down gracefully.

Options:
  -h, --help  show this help
`;

const io: DatabaseCommandIo = {
  env: process.env,
  stdout: (text) => void process.stdout.write(text),
  stderr: (text) => void process.stderr.write(text),
};

/** Runs one command; resolves to its exit code, or to undefined for `serve` (which keeps running). */
async function cli(argv: readonly string[]): Promise<number | undefined> {
  const [command, ...rest] = argv;
  switch (command) {
    case undefined:
    case 'serve':
      if (wantsHelp(rest)) {
        process.stdout.write(SERVE_USAGE);
        return EXIT_OK;
      }
      if (rest.length > 0) {
        process.stderr.write(`Unexpected argument "${rest[0]}".\n\n${SERVE_USAGE}`);
        return EXIT_USAGE;
      }
      {
        const { exitOnStartFailure, serve } = await import('./serve.js');
        await serve(process.env).catch(exitOnStartFailure);
      }
      return undefined;
    case 'migrate':
      return (await import('./db/migrate.cli.js')).runMigrateCommand(rest, io);
    case 'keys':
      return (await import('./modules/keys/keys.cli.js')).runKeysCommand(rest, io);
    case 'outbox':
      return (await import('./modules/mail/outbox.cli.js')).runOutboxCommand(rest, io);
    case 'sessions':
      return (await import('./modules/sessions/sessions.cli.js')).runSessionsCommand(rest, io);
    case 'users':
      return (await import('./modules/accounts/accounts.cli.js')).runUsersCommand(rest, io);
    case 'admin-keys':
      return (await import('./modules/admin/admin-keys.cli.js')).runAdminKeysCommand(rest, io);
    case 'webhooks':
      return (await import('./modules/webhooks/webhooks.cli.js')).runWebhooksCommand(rest, io);
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(USAGE);
      return EXIT_OK;
    default:
      process.stderr.write(`Unknown command "${command}".\n\n${USAGE}`);
      return EXIT_USAGE;
  }
}

cli(process.argv.slice(2)).then(
  (code) => {
    // `serve` keeps running; every other command exits (stdout and stderr writes to files and
    // pipes are synchronous on POSIX, so nothing printed is lost).
    if (code !== undefined) process.exit(code);
  },
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(EXIT_ERROR);
  },
);
