import {
  EXIT_ERROR,
  EXIT_OK,
  formatTable,
  parseCommandArgs,
  runWithUsage,
  UsageError,
  wantsHelp,
  withCommandDatabase,
  type DatabaseCommandIo,
} from '../../cli-support.js';
import {
  countOutboxEmailsByStatus,
  findOutboxStatus,
  listOutboxEmails,
  retryDeadEmails,
  type OutboxListRow,
  type OutboxStatus,
  type RetriedEmail,
} from './outbox.repo.js';
import { UUID_PATTERN } from '../tokens/access-token.service.js';

/** Rows `outbox list` shows unless `--limit` says otherwise. */
export const DEFAULT_LIST_LIMIT = 50;
/** Largest `--limit`: a screenful of tables is for reading, not for exporting the outbox. */
export const MAX_LIST_LIMIT = 1000;
/** `last_error` is cut to this many characters in the table, so one SMTP transcript does not wrap every line. */
export const LAST_ERROR_COLUMN_WIDTH = 80;

/** Every outbox status (docs/decisions.md#email-outbox), in the order the totals line shows them. */
const OUTBOX_STATUSES: readonly OutboxStatus[] = ['pending', 'sent', 'suppressed', 'dead', 'cancelled'];

/** `latchkey outbox --help`. */
export const OUTBOX_USAGE = `Usage: latchkey outbox <list|retry> [options]

The email outbox (emails waiting to be sent, sent, dead or cancelled; password-reset
requests done, or suppressed when no account has the address).

Commands:
  list   [--status pending|sent|suppressed|dead|cancelled] [--limit N]   show rows, newest first
  retry  <id> | --all-dead                                              put dead rows back to pending

See "latchkey outbox list --help" and "latchkey outbox retry --help".
`;

/** `latchkey outbox list --help`. */
export const OUTBOX_LIST_USAGE = `Usage: latchkey outbox list [--status pending|sent|suppressed|dead|cancelled] [--limit N]

Shows outbox rows, newest first: id, kind, status, recipient, attempts, last_error,
next_attempt_at, created_at (times in UTC), then the number of rows of each status. The email
content (and the verification code in it) is never shown.

Kinds: verification, password_reset, email_change (a code's email), notice (a security notice),
password_reset_request (a password-reset request: no email of its own; sent means its code and
email were queued as a password_reset row).

Statuses: pending (waiting), sent (accepted by the relay), suppressed (finished with nothing to
send: a password-reset request for an address no account has; last_error says so), dead (given
up: see last_error, then retry), cancelled (expired or superseded before it was sent).

Options:
  --status S  only rows of status S: pending, sent, suppressed, dead or cancelled
  --limit N   at most N rows, 1 to ${MAX_LIST_LIMIT} (default ${DEFAULT_LIST_LIMIT})
  -h, --help  show this help

The database is the service's (DATABASE_URL, or the embedded one in DATA_DIR: stop the service
first, the embedded database admits one process at a time).
`;

/** `latchkey outbox retry --help`. */
export const OUTBOX_RETRY_USAGE = `Usage: latchkey outbox retry <id> | --all-dead

Puts dead rows back to pending: attempts back to 0, next attempt now, last_error kept. The
service's outbox worker then sends them like any pending row (within about a second), with
the usual retries and backoff.

A dead row keeps its verification code until the code expires (VERIFICATION_CODE_TTL_SECONDS
after it was issued), or until a newer code for the address supersedes it; until then a retry
sends it. After that there is nothing left to send and the row is cancelled instead: its user
asks for a new code (POST /auth/v0/verify-email/resend). The command says how many of the
retried rows are in that case.

Options:
  --all-dead  retry every dead row
  -h, --help  show this help
`;

/** One table cell per column of {@link OutboxListRow}, in the order of the header. */
function listCells(row: OutboxListRow): string[] {
  const error = row.last_error === null ? '-' : row.last_error.replace(/\s+/g, ' ').trim();
  return [
    row.id,
    row.kind,
    row.status,
    row.recipient,
    String(row.attempts),
    error.length > LAST_ERROR_COLUMN_WIDTH ? `${error.slice(0, LAST_ERROR_COLUMN_WIDTH - 1)}…` : error,
    row.next_attempt_at.toISOString(),
    row.created_at.toISOString(),
  ];
}

/** `outbox list`: see {@link OUTBOX_LIST_USAGE}. */
async function listCommand(argv: readonly string[], io: DatabaseCommandIo): Promise<number> {
  const { values } = parseCommandArgs(argv, { status: { type: 'string' }, limit: { type: 'string' } }, { allowPositionals: false });
  const status = values.status;
  if (status !== undefined && !OUTBOX_STATUSES.includes(status as OutboxStatus)) {
    throw new UsageError(`--status: expected one of ${OUTBOX_STATUSES.join(', ')}, got "${status}"`);
  }
  let limit = DEFAULT_LIST_LIMIT;
  if (values.limit !== undefined) {
    if (!/^\d+$/.test(values.limit) || Number(values.limit) < 1 || Number(values.limit) > MAX_LIST_LIMIT) {
      throw new UsageError(`--limit: expected an integer from 1 to ${MAX_LIST_LIMIT}, got "${values.limit}"`);
    }
    limit = Number(values.limit);
  }
  return withCommandDatabase(io, async (db) => {
    const rows = await listOutboxEmails(db, { status: status as OutboxStatus | undefined, limit });
    const counts = await countOutboxEmailsByStatus(db);
    if (rows.length === 0) io.stdout(status === undefined ? 'The outbox is empty.\n' : `No ${status} rows.\n`);
    else io.stdout(formatTable(['id', 'kind', 'status', 'recipient', 'attempts', 'last_error', 'next_attempt_at', 'created_at'], rows.map(listCells)));
    const matching = status === undefined ? OUTBOX_STATUSES.reduce((sum, s) => sum + (counts[s] ?? 0), 0) : (counts[status as OutboxStatus] ?? 0);
    if (rows.length > 0 && rows.length < matching) io.stdout(`(${rows.length} of ${matching} shown; --limit for more)\n`);
    io.stdout(`Totals: ${OUTBOX_STATUSES.map((s) => `${s} ${counts[s] ?? 0}`).join(', ')}\n`);
    return EXIT_OK;
  }, { command: 'outbox list' });
}

/** True when the worker will cancel a retried row instead of sending it (nothing left to send at `now`). */
function willBeCancelled(row: RetriedEmail, now: Date): boolean {
  return !row.has_code || (row.expires_at !== null && row.expires_at <= now);
}

/** `outbox retry`: see {@link OUTBOX_RETRY_USAGE}. */
async function retryCommand(argv: readonly string[], io: DatabaseCommandIo): Promise<number> {
  const { values, positionals } = parseCommandArgs(argv, { 'all-dead': { type: 'boolean' } }, { allowPositionals: true });
  const allDead = values['all-dead'] === true;
  if (allDead === (positionals.length > 0)) throw new UsageError('expected either one row id or --all-dead');
  if (positionals.length > 1) throw new UsageError('expected one row id');
  const id = positionals[0];
  if (id !== undefined && !UUID_PATTERN.test(id)) throw new UsageError(`"${id}" is not an outbox row id (a UUID)`);

  return withCommandDatabase(io, async (db, { clock }) => {
    const now = clock.now();
    const retried = await retryDeadEmails(db, id === undefined ? 'all-dead' : { id }, now);
    if (id !== undefined && retried.length === 0) {
      const status = await findOutboxStatus(db, id);
      io.stderr(status === undefined ? `No outbox row ${id}.\n` : `Outbox row ${id} is ${status}, not dead; nothing to retry.\n`);
      return EXIT_ERROR;
    }
    if (retried.length === 0) {
      io.stdout('No dead rows; nothing to retry.\n');
      return EXIT_OK;
    }
    for (const row of retried) io.stdout(`retried  ${row.id}  ${row.recipient}${willBeCancelled(row, now) ? '  (nothing left to send: will be cancelled)' : ''}\n`);
    const doomed = retried.filter((row) => willBeCancelled(row, now)).length;
    io.stdout(`Put ${retried.length} dead row${retried.length === 1 ? '' : 's'} back to pending; the service's outbox worker takes ${retried.length === 1 ? 'it' : 'them'} up within about a second while it runs.\n`);
    if (doomed > 0) {
      io.stdout(
        `Note: ${doomed} of them ha${doomed === 1 ? 's' : 've'} no verification code left (dropped when the row died, or expired); ` +
          'the worker cancels such rows instead of sending them. Their users ask for a new code (POST /auth/v0/verify-email/resend).\n',
      );
    }
    return EXIT_OK;
  }, { command: 'outbox retry' });
}

/**
 * `latchkey outbox <list|retry>`: lets an operator see the email outbox
 * and put dead rows back to pending. Reads the service's configuration from `io.env` and works
 * on its database.
 *
 * @param argv the arguments after `outbox`.
 * @returns 0 on success or help; 1 when the configuration is bad, the schema is behind, or the
 *   row to retry does not exist or is not dead; 2 on a usage error (message and usage on stderr).
 * @throws the database's error when it cannot be reached.
 */
export async function runOutboxCommand(argv: readonly string[], io: DatabaseCommandIo): Promise<number> {
  const [subcommand, ...rest] = argv;
  if (subcommand === 'list') return wantsHelp(rest) ? help(io, OUTBOX_LIST_USAGE) : runWithUsage(OUTBOX_LIST_USAGE, io, () => listCommand(rest, io));
  if (subcommand === 'retry') return wantsHelp(rest) ? help(io, OUTBOX_RETRY_USAGE) : runWithUsage(OUTBOX_RETRY_USAGE, io, () => retryCommand(rest, io));
  if (subcommand !== undefined && wantsHelp([subcommand])) return help(io, OUTBOX_USAGE);
  return runWithUsage(OUTBOX_USAGE, io, async () => {
    throw new UsageError(subcommand === undefined ? 'Missing subcommand.' : `Unknown subcommand "${subcommand}".`);
  });
}

/** Prints `usage` to stdout: the answer to `--help`. */
function help(io: DatabaseCommandIo, usage: string): number {
  io.stdout(usage);
  return EXIT_OK;
}
