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
import { UUID_PATTERN } from '../tokens/access-token.service.js';
import { listAdminKeys, revokeAdminKey, type AdminKeyRow } from './admin-keys.repo.js';
import { ADMIN_KEY_NAME_MAX_LENGTH, ADMIN_SCOPES, createAdminKey, type AdminScope } from './admin-keys.service.js';

/** Longest `--expires-in-days`: ten years, the longest retention the service accepts. */
export const MAX_EXPIRES_IN_DAYS = 3650;

const MS_PER_DAY = 24 * 60 * 60 * 1000;

/** `latchkey admin-keys --help`. */
export const ADMIN_KEYS_USAGE = `Usage: latchkey admin-keys <create|list|revoke> [options]

API keys of the admin API (ADMIN_PORT; docs/admin-api.md).

Commands:
  create --name NAME --scopes SCOPE,SCOPE [--expires-in-days N]   make a key; prints it once
  list                                                             show every key (never the key itself)
  revoke ID                                                        stop a key at once

See "latchkey admin-keys create --help".
`;

/** `latchkey admin-keys create --help`. */
export const ADMIN_KEYS_CREATE_USAGE = `Usage: latchkey admin-keys create --name NAME --scopes SCOPE,SCOPE [--expires-in-days N]

Makes an admin API key and prints its id on one line and the key alone on the last line. The
key is shown this once: only its SHA-256 is stored. Give each backend its own key with the
fewest scopes it needs.

Scopes: ${ADMIN_SCOPES.join(', ')}
  users:read      list, search and read users and their sessions
  users:write     create, change, ban, unban and delete users; send a password reset; remove a second factor
  sessions:write  end a user's sessions
  webhooks        manage webhook endpoints
  audit:read      read the audit log

Options:
  --name NAME           what the key is for (1 to ${ADMIN_KEY_NAME_MAX_LENGTH} characters), shown by "list" and in the audit log
  --scopes S,S          comma-separated scopes
  --expires-in-days N   the key stops working after N days (1 to ${MAX_EXPIRES_IN_DAYS}); default: never
  -h, --help            show this help
`;

/** `latchkey admin-keys list --help`. */
export const ADMIN_KEYS_LIST_USAGE = `Usage: latchkey admin-keys list

Shows every admin API key, newest first: id, name, scopes, when it was created and last used
(to the minute), when it expires, and whether it is revoked. Never the key itself.

Options:
  -h, --help  show this help
`;

/** `latchkey admin-keys revoke --help`. */
export const ADMIN_KEYS_REVOKE_USAGE = `Usage: latchkey admin-keys revoke ID

Revokes the admin API key ID (from "list"): its next request answers 401. There is no undo;
make a new key instead.

Options:
  -h, --help  show this help
`;

/** A key name as `--name` must give it: 1 to 64 characters, none of them a control character. */
function keyName(raw: string | undefined): string {
  const name = raw?.trim();
  // eslint-disable-next-line no-control-regex
  if (name === undefined || name === '' || [...name].length > ADMIN_KEY_NAME_MAX_LENGTH || /[\u0000-\u001f\u007f]/.test(name)) {
    throw new UsageError(`--name: expected 1 to ${ADMIN_KEY_NAME_MAX_LENGTH} characters without control characters`);
  }
  return name;
}

/** The scopes `--scopes` lists, each once. */
function keyScopes(raw: string | undefined): AdminScope[] {
  const scopes = (raw ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '');
  if (scopes.length === 0) throw new UsageError(`--scopes: expected one or more of ${ADMIN_SCOPES.join(', ')}, comma-separated`);
  const unknown = scopes.filter((s) => !(ADMIN_SCOPES as readonly string[]).includes(s));
  if (unknown.length > 0) throw new UsageError(`--scopes: unknown scope "${unknown[0]}"; expected ${ADMIN_SCOPES.join(', ')}`);
  return [...new Set(scopes as AdminScope[])];
}

/** `admin-keys create`: see {@link ADMIN_KEYS_CREATE_USAGE}. */
async function createCommand(argv: readonly string[], io: DatabaseCommandIo): Promise<number> {
  const { values } = parseCommandArgs(argv, { name: { type: 'string' }, scopes: { type: 'string' }, 'expires-in-days': { type: 'string' } }, { allowPositionals: false });
  const name = keyName(values.name);
  const scopes = keyScopes(values.scopes);
  const days = values['expires-in-days'];
  if (days !== undefined && (!/^\d+$/.test(days) || Number(days) < 1 || Number(days) > MAX_EXPIRES_IN_DAYS)) {
    throw new UsageError(`--expires-in-days: expected an integer from 1 to ${MAX_EXPIRES_IN_DAYS}, got "${days}"`);
  }
  return withCommandDatabase(io, async (db, { clock }) => {
    const now = clock.now();
    const expiresAt = days === undefined ? null : new Date(now.getTime() + Number(days) * MS_PER_DAY);
    const { id, key } = await createAdminKey(db, { name, scopes, expiresAt, now });
    io.stdout(`Created admin API key "${name}" with scopes ${scopes.join(',')}, ${expiresAt === null ? 'not expiring' : `expiring ${expiresAt.toISOString()}`}.\n`);
    io.stdout(`id: ${id}\n`);
    io.stdout('Store the key now: it is shown this once, and only its hash is kept.\n');
    io.stdout(`${key}\n`);
    return EXIT_OK;
  }, { command: 'admin-keys create' });
}

/** A time cell: ISO 8601 in UTC to the second, or `-`. */
function when(date: Date | null): string {
  return date === null ? '-' : date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** One table row of `list`. */
function listCells(row: AdminKeyRow, now: Date): string[] {
  const expires = row.expires_at === null ? 'never' : `${when(row.expires_at)}${row.expires_at.getTime() <= now.getTime() ? ' (expired)' : ''}`;
  return [row.id, row.name, row.scopes.join(','), when(row.created_at), when(row.last_used_at), expires, row.revoked_at === null ? 'no' : `yes, ${when(row.revoked_at)}`];
}

/** `admin-keys list`: see {@link ADMIN_KEYS_LIST_USAGE}. */
async function listCommand(argv: readonly string[], io: DatabaseCommandIo): Promise<number> {
  parseCommandArgs(argv, {}, { allowPositionals: false });
  return withCommandDatabase(io, async (db, { clock }) => {
    const rows = await listAdminKeys(db);
    const now = clock.now();
    if (rows.length === 0) io.stdout('No admin API keys. Make one with "latchkey admin-keys create".\n');
    else io.stdout(formatTable(['id', 'name', 'scopes', 'created', 'last_used', 'expires', 'revoked'], rows.map((row) => listCells(row, now))));
    return EXIT_OK;
  }, { command: 'admin-keys list' });
}

/** `admin-keys revoke`: see {@link ADMIN_KEYS_REVOKE_USAGE}. */
async function revokeCommand(argv: readonly string[], io: DatabaseCommandIo): Promise<number> {
  const { positionals } = parseCommandArgs(argv, {}, { allowPositionals: true });
  if (positionals.length !== 1) throw new UsageError('expected one key id');
  const id = positionals[0]!;
  if (!UUID_PATTERN.test(id)) throw new UsageError(`"${id}" is not an admin API key id (a UUID, as "list" shows it)`);
  return withCommandDatabase(io, async (db, { clock }) => {
    const outcome = await revokeAdminKey(db, id.toLowerCase(), clock.now());
    if (outcome === undefined) {
      io.stderr(`No admin API key ${id}.\n`);
      return EXIT_ERROR;
    }
    io.stdout(outcome === 'revoked' ? `Revoked admin API key ${id}: its next request answers 401.\n` : `Admin API key ${id} was already revoked.\n`);
    return EXIT_OK;
  }, { command: 'admin-keys revoke' });
}

/**
 * `latchkey admin-keys <create|list|revoke>`: the admin API's keys (docs/admin-api.md#api-keys).
 *
 * @param argv the arguments after `admin-keys`.
 * @returns 0 on success or help; 1 when the configuration is bad, the schema is behind or the
 *   key to revoke does not exist; 2 on a usage error (message and usage on stderr).
 * @throws the database's error when it cannot be reached.
 */
export async function runAdminKeysCommand(argv: readonly string[], io: DatabaseCommandIo): Promise<number> {
  const [subcommand, ...rest] = argv;
  const commands: Record<string, { usage: string; run: (args: readonly string[], io: DatabaseCommandIo) => Promise<number> }> = {
    create: { usage: ADMIN_KEYS_CREATE_USAGE, run: createCommand },
    list: { usage: ADMIN_KEYS_LIST_USAGE, run: listCommand },
    revoke: { usage: ADMIN_KEYS_REVOKE_USAGE, run: revokeCommand },
  };
  const command = subcommand === undefined ? undefined : commands[subcommand];
  if (command !== undefined) {
    if (wantsHelp(rest)) {
      io.stdout(command.usage);
      return EXIT_OK;
    }
    return runWithUsage(command.usage, io, () => command.run(rest, io));
  }
  if (subcommand !== undefined && wantsHelp([subcommand])) {
    io.stdout(ADMIN_KEYS_USAGE);
    return EXIT_OK;
  }
  return runWithUsage(ADMIN_KEYS_USAGE, io, async () => {
    throw new UsageError(subcommand === undefined ? 'Missing subcommand.' : `Unknown subcommand "${subcommand}".`);
  });
}
