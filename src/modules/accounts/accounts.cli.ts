import {
  auditLogger,
  EXIT_ERROR,
  EXIT_OK,
  findUserNamed,
  parseUserOption,
  runSubcommandGroup,
  withCommandDatabase,
  type DatabaseCommandIo,
} from '../../cli-support.js';
import { securityEvent } from '../audit/security-events.js';
import { CLI_ACTOR, deleteUserAccount } from '../admin/operator-actions.js';

/** `latchkey users --help`. */
export const USERS_USAGE = `Usage: latchkey users delete --user <id|username>

Commands:
  delete --user <id|username>   delete one user's account and everything that belongs to it

See "latchkey users delete --help".
`;

/** `latchkey users delete --help`. */
export const USERS_DELETE_USAGE = `Usage: latchkey users delete --user <id|username>

Deletes the user's account as POST /auth/v0/delete-account does, without its password: the
user, its devices, sessions, refresh tokens and codes, in one transaction, with a "user.delete"
entry of the admin audit log (key "cli"), exactly as DELETE /admin/v0/users/{id} does. Its
refresh and access tokens stop working at this service at once (services that verify access
tokens with the JWKS alone accept them until they expire, ACCESS_TOKEN_TTL_SECONDS). Its username, email
and phone are free for a new sign-up. Emails queued to its address and not yet sent are
cancelled, and an "account deleted" notice is queued to its verified address: a running service
sends it (its outbox worker), otherwise the next one to start. There is no undo.

Options:
  --user U    the user's id (a UUID) or username
  -h, --help  show this help

The database is the service's (DATABASE_URL, or the embedded one in DATA_DIR: stop the service
first, the embedded database admits one process at a time).
`;

/** `users delete`: see {@link USERS_DELETE_USAGE}. */
async function deleteCommand(argv: readonly string[], io: DatabaseCommandIo): Promise<number> {
  const who = parseUserOption(argv);
  return withCommandDatabase(io, async (db, { config, clock }) => {
    const { user, by } = await findUserNamed(db, who);
    const erased = user === undefined ? undefined : await deleteUserAccount(db, CLI_ACTOR, user.id, clock.now());
    if (user === undefined || erased === undefined) {
      io.stderr(`No user with ${by} "${who}".\n`);
      return EXIT_ERROR;
    }
    securityEvent(auditLogger(config, io), 'account.deleted', { userId: user.id, reason: 'operator' });
    io.stdout(`Deleted ${user.username} (${user.id})${erased.noticeQueued ? '; a notice is queued to its email address' : ''}.\n`);
    return EXIT_OK;
  }, { command: 'users delete' });
}

/**
 * `latchkey users delete --user <id|username>`: deletes one account with the admin API's
 * {@link deleteUserAccount} (notice and audit entry included, actor `cli`) and logs an
 * `account.deleted` security event to stderr.
 *
 * @param argv the arguments after `users`.
 * @returns 0 on success or help; 1 when the configuration is bad, the schema is behind or the
 *   user does not exist; 2 on a usage error.
 * @throws the database's error when it cannot be reached.
 */
export async function runUsersCommand(argv: readonly string[], io: DatabaseCommandIo): Promise<number> {
  return runSubcommandGroup(argv, io, { usage: USERS_USAGE, subcommand: 'delete', subcommandUsage: USERS_DELETE_USAGE, run: (rest) => deleteCommand(rest, io) });
}
