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
import { CLI_ACTOR, revokeUserSessions } from '../admin/operator-actions.js';

/** `latchkey sessions --help`. */
export const SESSIONS_USAGE = `Usage: latchkey sessions revoke --user <id|username>

Commands:
  revoke --user <id|username>   revoke every active session of one user

See "latchkey sessions revoke --help".
`;

/** `latchkey sessions revoke --help`. */
export const SESSIONS_REVOKE_USAGE = `Usage: latchkey sessions revoke --user <id|username>

Revokes every active session of the user, as DELETE /admin/v0/users/{id}/sessions does, and
prints how many it revoked; the admin audit log records it (key "cli") when there was any.
The user's refresh tokens stop working at once, and so do the access tokens at this service
(it checks the session on every request). Services that verify access tokens with the JWKS
alone accept them until they expire (ACCESS_TOKEN_TTL_SECONDS).
The user can sign in again; to stop that, ban the user (POST /admin/v0/users/{id}/ban).

Options:
  --user U    the user's id (a UUID) or username
  -h, --help  show this help

The database is the service's (DATABASE_URL, or the embedded one in DATA_DIR: stop the service
first, the embedded database admits one process at a time).
`;

/** `sessions revoke`: see {@link SESSIONS_REVOKE_USAGE}. */
async function revokeCommand(argv: readonly string[], io: DatabaseCommandIo): Promise<number> {
  const who = parseUserOption(argv);
  return withCommandDatabase(io, async (db, { config, clock }) => {
    const { user, by } = await findUserNamed(db, who);
    const count = user === undefined ? undefined : await revokeUserSessions(db, CLI_ACTOR, user.id, clock.now());
    if (user === undefined || count === undefined) {
      io.stderr(`No user with ${by} "${who}".\n`);
      return EXIT_ERROR;
    }
    securityEvent(auditLogger(config, io), 'session.revoked', { userId: user.id, reason: 'revoked_by_admin', count });
    io.stdout(`Revoked ${count} active session${count === 1 ? '' : 's'} of ${user.username} (${user.id}).\n`);
    return EXIT_OK;
  }, { command: 'sessions revoke' });
}

/**
 * `latchkey sessions revoke --user <id|username>`: revokes every active
 * session of one user with the admin API's {@link revokeUserSessions} (soft,
 * `revoked_reason = 'revoked_by_admin'`, audited with actor `cli`) and logs a `session.revoked`
 * security event to stderr.
 *
 * @param argv the arguments after `sessions`.
 * @returns 0 on success (also when the user had no active session) or help; 1 when the
 *   configuration is bad, the schema is behind or the user does not exist; 2 on a usage error.
 * @throws the database's error when it cannot be reached.
 */
export async function runSessionsCommand(argv: readonly string[], io: DatabaseCommandIo): Promise<number> {
  return runSubcommandGroup(argv, io, { usage: SESSIONS_USAGE, subcommand: 'revoke', subcommandUsage: SESSIONS_REVOKE_USAGE, run: (rest) => revokeCommand(rest, io) });
}
