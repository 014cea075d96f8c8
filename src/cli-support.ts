import { parseArgs, type ParseArgsConfig } from 'node:util';
import { systemClock, type Clock } from './clock.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { DataDirLockedError } from './db/data-dir-lock.js';
import type { Db } from './db/db.js';
import { schemaStatus } from './db/migrate.js';
import { openDatabase } from './db/open.js';
import type { FastifyBaseLogger } from 'fastify';
import { createLogger } from './app.js';
import type { CommandIo } from './modules/keys/keys.cli.js';
import { UUID_PATTERN } from './modules/tokens/access-token.service.js';
import { normalizeUsername } from './modules/users/identifiers.js';
import { findUserById, findUserByUsername, type UserRow } from './modules/users/users.shared.js';

export type { CommandIo } from './modules/keys/keys.cli.js';

/** Exit code of a command that succeeded (and of `--help`). */
export const EXIT_OK = 0;
/** Exit code of a command that failed: bad configuration, schema behind, nothing found, database error. */
export const EXIT_ERROR = 1;
/** Exit code of a command line that does not fit the command's usage. */
export const EXIT_USAGE = 2;

/**
 * What a command that works on the database needs besides {@link CommandIo}. Both members are
 * for tests: production opens the configured database and uses the system clock.
 */
export interface DatabaseCommandIo extends CommandIo {
  /** Opens the database for `config` (default: `openDatabase`, which locks DATA_DIR on PGlite); the command closes what this returns. */
  readonly openDatabase?: (config: Config) => Promise<Db>;
  readonly clock?: Clock;
}

/** A command line that does not fit the command's usage: printed with the usage, exit {@link EXIT_USAGE}. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** True when `argv` asks for help (`--help`, `-h`, or `help` as the first word). */
export function wantsHelp(argv: readonly string[]): boolean {
  return argv[0] === 'help' || argv.includes('--help') || argv.includes('-h');
}

/**
 * `node:util` `parseArgs` in strict mode, with its errors (unknown option, missing value,
 * stray positional) turned into {@link UsageError}.
 */
export function parseCommandArgs<T extends NonNullable<ParseArgsConfig['options']>>(
  argv: readonly string[],
  options: T,
  settings: { allowPositionals: boolean },
): { values: ReturnType<typeof parseArgs<{ options: T; strict: true; allowPositionals: boolean }>>['values']; positionals: string[] } {
  try {
    const parsed = parseArgs({ args: [...argv], options, strict: true, allowPositionals: settings.allowPositionals });
    return { values: parsed.values, positionals: parsed.positionals };
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/**
 * Runs a command body and maps its outcome to an exit code: a {@link UsageError} prints the
 * message and `usage` to stderr (exit 2). Anything else thrown propagates (the CLI prints it,
 * exit 1).
 */
export async function runWithUsage(usage: string, io: CommandIo, body: () => Promise<number>): Promise<number> {
  try {
    return await body();
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr(`${err.message}\n\n${usage}`);
      return EXIT_USAGE;
    }
    throw err;
  }
}

/**
 * Runs `fn` with the configured database (the service's own configuration: `loadConfig(io.env)`,
 * DATABASE_URL or the embedded database in DATA_DIR) and closes it afterwards. Refuses, with
 * exit 1, a bad configuration (every problem listed) and a schema that is behind the code (run
 * `latchkey migrate` first), so that a command never works on tables it does not know.
 *
 * The embedded PGlite database admits one process at a time: its DATA_DIR is locked while the
 * command runs, and a command started while the service (or another command) holds it is
 * refused at once with exit 1 and a message naming the holder ({@link DataDirLockedError},
 * docs/operations.md "One process per DATA_DIR"). Stop the service first, or use DATABASE_URL.
 *
 * @param options.requireCurrentSchema false only for `migrate`, whose job is a schema that is behind.
 * @param options.command the command's name for the lock (`migrate`, `sessions revoke`, ...),
 *   shown to a process refused while this one runs; `cli` when not given.
 * @returns what `fn` returns, or {@link EXIT_ERROR}.
 * @throws what `fn` or the database throws (a connection error, for example).
 */
export async function withCommandDatabase(
  io: DatabaseCommandIo,
  fn: (db: Db, context: { config: Config; clock: Clock }) => Promise<number>,
  options: { requireCurrentSchema?: boolean; command?: string } = {},
): Promise<number> {
  let config: Config;
  try {
    config = loadConfig(io.env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    io.stderr(`${err.message}\n`);
    return EXIT_ERROR;
  }
  let db: Db;
  try {
    db = await (io.openDatabase ?? ((c: Config) => openDatabase(c, options.command ?? 'cli')))(config);
  } catch (err) {
    if (!(err instanceof DataDirLockedError)) throw err;
    io.stderr(`${err.message}\n`);
    return EXIT_ERROR;
  }
  try {
    const status = (options.requireCurrentSchema ?? true) ? await schemaStatus(db) : undefined;
    if (status !== undefined && status.current < status.latest) {
      io.stderr(`The database schema is at version ${status.current}, this version of the service needs ${status.latest}: run "latchkey migrate" first.\n`);
      return EXIT_ERROR;
    }
    return await fn(db, { config, clock: io.clock ?? systemClock });
  } finally {
    await db.close();
  }
}

/**
 * Formats rows as a plain-text table: a header line, then one line per row, columns separated
 * by two spaces and padded to their widest cell. Cells must not contain line breaks.
 */
export function formatTable(columns: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = columns.map((c, i) => Math.max(c.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(columns), ...rows.map(line)].join('\n') + '\n';
}

/**
 * The `--user <id|username>` option of the operator commands (`sessions revoke`, `users
 * delete`), trimmed.
 * @throws {UsageError} when it is missing or empty, or for any other option or a positional.
 */
export function parseUserOption(argv: readonly string[]): string {
  const { values } = parseCommandArgs(argv, { user: { type: 'string' } }, { allowPositionals: false });
  const who = values.user?.trim();
  if (who === undefined || who === '') throw new UsageError('--user: expected a user id or username');
  return who;
}

/**
 * The user `who` names: by id when it is a UUID, else by username (normalised as at sign-in).
 * A username never looks like a UUID (usernames have no hyphens), so the two cannot be confused.
 * @returns the user (undefined when there is none) and which of the two `who` was taken for.
 */
export async function findUserNamed(db: Db, who: string): Promise<{ user: UserRow | undefined; by: 'id' | 'username' }> {
  return UUID_PATTERN.test(who)
    ? { user: await findUserById(db, who.toLowerCase()), by: 'id' }
    : { user: await findUserByUsername(db, normalizeUsername(who)), by: 'username' };
}

/**
 * The logger of an operator command's audit trail (security events, docs/decisions.md
 * "Logging"): the service's format at `config.logLevel`, on stderr, so stdout stays the answer.
 */
export function auditLogger(config: Config, io: CommandIo): FastifyBaseLogger {
  return createLogger(config.logLevel, { write: (line: string) => io.stderr(line) });
}

/**
 * `latchkey <group> <subcommand> ...` for a group of one subcommand: `--help` of the
 * subcommand prints `subcommandUsage`, the group's help prints `groupUsage`, and a missing or
 * unknown subcommand is a usage error (exit 2).
 */
export async function runSubcommandGroup(
  argv: readonly string[],
  io: CommandIo,
  group: { usage: string; subcommand: string; subcommandUsage: string; run: (args: readonly string[]) => Promise<number> },
): Promise<number> {
  const [subcommand, ...rest] = argv;
  if (subcommand === group.subcommand) {
    if (wantsHelp(rest)) {
      io.stdout(group.subcommandUsage);
      return EXIT_OK;
    }
    return runWithUsage(group.subcommandUsage, io, () => group.run(rest));
  }
  if (subcommand !== undefined && wantsHelp([subcommand])) {
    io.stdout(group.usage);
    return EXIT_OK;
  }
  return runWithUsage(group.usage, io, async () => {
    throw new UsageError(subcommand === undefined ? 'Missing subcommand.' : `Unknown subcommand "${subcommand}".`);
  });
}
