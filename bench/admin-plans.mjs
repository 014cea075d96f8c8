// The query plans of the admin API's user listing, search and read on a large users table
// (docs/performance.md, "Admin API"): creates a throwaway database on the machine's PostgreSQL,
// applies the migrations, inserts ADMIN_PLANS_USERS users (default 1 000 000) with
// generate_series, runs EXPLAIN (ANALYZE, BUFFERS) of the statements the service sends (the
// repository functions themselves, through a query function that prefixes EXPLAIN), prints
// them, and drops the database.
//
//   npm run build && node bench/admin-plans.mjs
//
// Not a test and not part of `npm run bench`; run by hand after changing those statements or
// the indexes of migration 018.
import { openPostgres } from '../dist/src/db/pg.js';
import { migrate } from '../dist/src/db/migrate.js';
import { findAdminUser, listAdminUsers } from '../dist/src/modules/admin/admin-users.repo.js';
import { listAdminAudit } from '../dist/src/modules/admin/admin-audit.repo.js';
import { KEYSET_START } from '../dist/src/modules/admin/keyset-cursor.js';
import { createDatabase, dropDatabase, ensurePostgres, envNumber, log, withClient } from './lib.mjs';

const users = Math.floor(envNumber('ADMIN_PLANS_USERS', 1_000_000));
const name = `latchkey_admin_plans_${Date.now()}`;

await ensurePostgres();
const url = await createDatabase(name);
try {
  const db = openPostgres({ url, poolMax: 2, poolMode: 'session' });
  await migrate(db);
  log(`database ${name}: inserting ${users} users`);
  const started = Date.now();
  // Seeded on a connection of its own: the service's pool stops statements after 5 s.
  const seed = (sql) => withClient(url, (c) => c.query(sql));
  // Usernames and emails that start differently (an md5 prefix), one user in three with a phone,
  // sign-ups spread over about three years.
  await seed(
    `INSERT INTO users (id, username, email, phone, password_hash, is_email_verified, created_at, updated_at)
     SELECT gen_random_uuid(), substr(md5(g::text), 1, 8) || '_' || g,
            substr(md5((g * 7)::text), 1, 10) || '.' || g || '@example.com',
            CASE WHEN g % 3 = 0 THEN '+44' || lpad(g::text, 10, '0') END,
            'x', true, now() - g * interval '90 seconds', now()
       FROM generate_series(1, ${users}) g`,
  );
  // A second user's audit trail, so that the audit listing reads a table of some size too.
  await seed(
    `INSERT INTO admin_audit_log (id, at, key_id, key_name, action, user_id, details)
     SELECT gen_random_uuid(), now() - g * interval '10 seconds', NULL, 'cli', 'user.update', u.id, '{}'
       FROM generate_series(1, ${Math.floor(users / 10)}) g, (SELECT id FROM users LIMIT 1) u`,
  );
  await seed('ANALYZE');
  log(`inserted in ${Math.round((Date.now() - started) / 1000)} s`);

  const sample = (await db.query('SELECT id, username, email, phone FROM users WHERE phone IS NOT NULL ORDER BY id LIMIT 1')).rows[0];
  /** The plan of the one statement `run` sends (its result is the repository function's, made of plan lines; ignored). */
  const show = async (title, run) => {
    let plan = [];
    await run({
      query: async (sql, params) => {
        const result = await db.query(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, SUMMARY ON) ${sql}`, params);
        plan = result.rows.map((r) => r['QUERY PLAN']);
        return { rows: [], rowCount: 0 };
      },
    });
    process.stdout.write(`\n### ${title}\n\n\`\`\`\n${plan.join('\n')}\n\`\`\`\n`);
  };
  const page = 51; // a page of 50, read with one more
  await show('List users, first page (no query)', (q) => listAdminUsers(q, { query: undefined, after: KEYSET_START, limit: page }));
  const middle = (await db.query(`SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at, id FROM users ORDER BY created_at DESC, id DESC OFFSET ${Math.floor(users / 2)} LIMIT 1`)).rows[0];
  await show('List users, a page in the middle (cursor)', (q) => listAdminUsers(q, { query: undefined, after: middle, limit: page }));
  await show(`Search "a" (a one-letter prefix: about 1 user in 16)`, (q) => listAdminUsers(q, { query: 'a', after: KEYSET_START, limit: page }));
  await show(`Search "${sample.username.slice(0, 5)}" (a five-letter prefix)`, (q) => listAdminUsers(q, { query: sample.username.slice(0, 5), after: KEYSET_START, limit: page }));
  await show(`Search "${sample.email.slice(0, 12)}" (an email prefix)`, (q) => listAdminUsers(q, { query: sample.email.slice(0, 12), after: KEYSET_START, limit: page }));
  await show(`Search "${sample.phone.slice(0, 9)}" (a phone prefix)`, (q) => listAdminUsers(q, { query: sample.phone.slice(0, 9), after: KEYSET_START, limit: page }));
  await show('Search an exact user id', (q) => listAdminUsers(q, { query: sample.id, after: KEYSET_START, limit: page }));
  await show('Search a prefix no user has', (q) => listAdminUsers(q, { query: 'zzzz', after: KEYSET_START, limit: page }));
  await show('Get a user', (q) => findAdminUser(q, sample.id));
  await show('Audit log, first page', (q) => listAdminAudit(q, { userId: undefined, after: KEYSET_START, limit: page }));
  await show("Audit log, one user's entries", (q) => listAdminAudit(q, { userId: sample.id, after: KEYSET_START, limit: page }));
  await db.close();
} finally {
  await dropDatabase(name);
  log(`dropped ${name}`);
}
