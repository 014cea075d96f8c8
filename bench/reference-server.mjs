// Reference servers for the benchmark (bench/run.mjs): the ceiling the service is compared with.
//
//   node bench/reference-server.mjs empty             GET /  -> {}
//   node bench/reference-server.mjs pk <table> <ids>   GET /:n -> one primary-key SELECT through pg
//   node bench/reference-server.mjs pglite-pk <dir> <rows>
//                                                     GET /:n -> one primary-key SELECT through PGlite
//
// All are bare Fastify 5 with logging off. The `pk` server reads DATABASE_URL and uses a pg
// pool of DATABASE_POOL_MAX connections (the service's default, 10, when unset) and a prepared
// statement, as the service does (src/db/pg.ts); <ids> is a file of UUIDs, one per line, and
// request n selects the (n mod count)-th of them, so requests spread over the table like the
// service's do. The `pglite-pk` server fills a PGlite database of its own (PGlite admits one
// process) and, like the service on PGlite, runs unnamed statements. Listens on 127.0.0.1, port from PORT (0: any),
// and prints `listening <port>` on stdout once it accepts connections.
import { readFileSync } from 'node:fs';
import Fastify from 'fastify';

const [mode, table, idsFile] = process.argv.slice(2);
const app = Fastify({ logger: false });

if (mode === 'empty') {
  app.get('/', async () => ({}));
} else if (mode === 'pk') {
  const { default: pg } = await import('pg');
  if (table === undefined || !/^[a-z_][a-z0-9_]*$/.test(table) || idsFile === undefined) throw new Error('usage: pk <table> <ids file>');
  const ids = readFileSync(idsFile, 'utf8').split('\n').filter((line) => line !== '');
  if (ids.length === 0) throw new Error(`${idsFile}: no ids`);
  const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.DATABASE_POOL_MAX ?? 10) });
  pool.on('error', () => {});
  // A named (prepared) statement, as the service's statements are: the ceiling, not a handicap.
  const query = { name: 'reference_pk', text: `SELECT * FROM ${table} WHERE id = $1` };
  app.get('/:n', async (request, reply) => {
    const n = Number(request.params.n) >>> 0;
    const { rows } = await pool.query({ ...query, values: [ids[n % ids.length]] });
    if (rows.length !== 1) return reply.code(404).send({});
    return rows[0];
  });
  app.addHook('onClose', async () => pool.end());
} else if (mode === 'pglite-pk') {
  // The embedded reference: a PGlite database of its own in <dir> (one process per PGlite),
  // with a table shaped like `sessions` holding <rows> rows.
  const { PGlite } = await import('@electric-sql/pglite');
  const rows = Number(idsFile);
  if (table === undefined || !(rows > 0)) throw new Error('usage: pglite-pk <dir> <rows>');
  const db = new PGlite(table);
  await db.waitReady;
  await db.exec(`CREATE TABLE IF NOT EXISTS reference (
    id uuid PRIMARY KEY, user_id uuid NOT NULL, device_id uuid, ip text, user_agent text,
    created_at timestamptz NOT NULL, last_used_at timestamptz, expires_at timestamptz NOT NULL,
    revoked_at timestamptz, revoked_reason text)`);
  await db.query(`INSERT INTO reference (id, user_id, device_id, ip, user_agent, created_at, last_used_at, expires_at)
    SELECT gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), '127.0.0.1', 'reference', now(), now(), now() + interval '30 days'
      FROM generate_series(1, ${rows})`);
  await db.exec('ANALYZE reference');
  const ids = (await db.query('SELECT id FROM reference ORDER BY random() LIMIT 10000')).rows.map((r) => r.id);
  app.get('/:n', async (request, reply) => {
    const n = Number(request.params.n) >>> 0;
    const { rows: found } = await db.query('SELECT * FROM reference WHERE id = $1', [ids[n % ids.length]]);
    if (found.length !== 1) return reply.code(404).send({});
    return found[0];
  });
  app.addHook('onClose', async () => db.close());
} else {
  throw new Error(`unknown mode ${mode}: expected empty, pk or pglite-pk`);
}

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    app.close().then(() => process.exit(0), () => process.exit(1));
  });
}
await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT ?? 0) });
process.stdout.write(`listening ${app.server.address().port}\n`);
