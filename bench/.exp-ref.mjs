import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import os from 'node:os'; import path from 'node:path';
import { createDatabase, dropDatabase, insertBallast, measure, referenceRequests, startReference, withClient } from './lib.mjs';
const tmp = mkdtempSync(path.join(os.tmpdir(), 'expref-'));
const dbName = `auth_expref_${Date.now()}`; const dbUrl = await createDatabase(dbName);
await withClient(dbUrl, async (c) => { await c.query(`CREATE TABLE t (id uuid PRIMARY KEY, user_id uuid NOT NULL, device_id uuid, ip text, user_agent text, created_at timestamptz NOT NULL, last_used_at timestamptz, expires_at timestamptz NOT NULL, revoked_at timestamptz, revoked_reason text)`); await c.query(`INSERT INTO t SELECT gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), '127.0.0.1', 'x', now(), now(), now() + interval '30 days' FROM generate_series(1,100000)`); const ids = await c.query('SELECT id FROM t ORDER BY random() LIMIT 10000'); writeFileSync(path.join(tmp, 'ids'), ids.rows.map((r) => r.id).join('\n')); });
const ref = await startReference({ args: ['pk', 't', path.join(tmp, 'ids')], env: { ...process.env, DATABASE_URL: dbUrl }, logFile: path.join(tmp, 'ref.log') });
const cpu = (pid) => { const f = readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8').split(') ')[1].split(' '); return (Number(f[11]) + Number(f[12])) / 100; };
for (const conns of [32, 1]) {
  await measure({ url: ref.url, requests: referenceRequests('pk'), connections: conns, seconds: 3 });
  const a = cpu(ref.pid); const m = await measure({ url: ref.url, requests: referenceRequests('pk'), connections: conns, seconds: 8 }); const b = cpu(ref.pid);
  console.log(`ref pk c=${conns}: ${m.reqPerSec.toFixed(0)} req/s p50 ${m.p50Ms.toFixed(2)} p99 ${m.p99Ms.toFixed(2)}; main µs/req ${((b - a) * 1e6 / m.ok).toFixed(0)}`);
}
await ref.stop(); await dropDatabase(dbName);
