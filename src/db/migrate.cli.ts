import { EXIT_OK, parseCommandArgs, runWithUsage, wantsHelp, withCommandDatabase, type DatabaseCommandIo } from '../cli-support.js';
import { migrate, schemaStatus } from './migrate.js';

/** `latchkey migrate --help`. */
export const MIGRATE_USAGE = `Usage: latchkey migrate

Applies every pending database migration (forward-only SQL files in migrations/), under a
PostgreSQL advisory lock so that several instances or deploy steps never migrate at once, and
prints the schema version. Run it before starting a new version with MIGRATE_ON_START=false.

The database is the service's: DATABASE_URL, or the embedded database in DATA_DIR (stop the
service first: the embedded database admits one process at a time).

Options:
  -h, --help  show this help
`;

/**
 * `latchkey migrate` (docs/operations.md, docs/operations.md): applies pending migrations and
 * reports the schema version ("Schema is current (version N)." when nothing was pending).
 *
 * @param argv the arguments after `migrate`; only `--help` is accepted.
 * @returns 0 on success or help, 1 on a bad configuration, 2 on a usage error.
 * @throws the database's error when it cannot be reached or a migration fails (nothing of the
 *   failed run stays applied).
 */
export async function runMigrateCommand(argv: readonly string[], io: DatabaseCommandIo): Promise<number> {
  if (wantsHelp(argv)) {
    io.stdout(MIGRATE_USAGE);
    return EXIT_OK;
  }
  return runWithUsage(MIGRATE_USAGE, io, async () => {
    parseCommandArgs(argv, {}, { allowPositionals: false });
    return withCommandDatabase(io, async (db) => {
      const applied = await migrate(db);
      const status = await schemaStatus(db);
      io.stdout(
        applied.length === 0
          ? `Schema is current (version ${status.current}).\n`
          : `Applied migrations ${applied.join(', ')}; schema is at version ${status.current}.\n`,
      );
      return EXIT_OK;
    }, { requireCurrentSchema: false, command: 'migrate' });
  });
}
