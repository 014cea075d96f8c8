import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { loadWebhookSecretKey } from '../../src/modules/keys/keys.service.js';
import { DELIVERY_LEASE_MS, MAX_IN_FLIGHT } from '../../src/modules/webhooks/delivery.worker.js';
import { createWebhooksService } from '../../src/modules/webhooks/webhooks.service.js';
import { verifyWebhook } from '../../packages/verify/src/webhook.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { PASSWORD, uniqueName } from '../helpers/flows.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { ON_POSTGRES } from './helpers/app-context.js';
import { startService, stopService, type ServiceProcess } from './helpers/service-process.js';
import { waitUntil } from './helpers/wait.js';

/**
 * Webhook delivery survives SIGKILL (docs/reliability.md): the real service records events
 * (sign-ups) while its receiver stalls, so that when it is killed some deliveries are in flight
 * (leased, their attempts unanswered) and others were recorded but not yet attempted (waiting
 * for a free slot, or not yet fanned out). Started again on the same database and DATA_DIR, the
 * service delivers every event of every sign-up that was answered 201, the unattempted ones at
 * once and the leased ones when their lease ends; nothing is lost, each recorded attempt once.
 *
 * The lease (DELIVERY_LEASE_MS, 60 s) is not shortened: as in crash-recovery.test.ts, the test
 * checks that the new process leaves the dead one's leased deliveries alone, then moves their
 * `lease_expires_at` to the past, which is what waiting would do.
 *
 * PostgreSQL only, as crash-recovery.test.ts: crash safety rests on PostgreSQL's durability.
 */

/** Sign-ups recorded before the kill: more than one worker's attempts in flight, so some wait for a slot. */
const SIGN_UPS = MAX_IN_FLIGHT + 12;
/** Parallel sign-up loops. */
const LOOPS = 4;
/** How long the test waits for the restarted service to deliver, in milliseconds. */
const DELIVERY_WAIT_MS = 30_000;

describe.runIf(ON_POSTGRES)('SIGKILL between recording and delivery, and during deliveries (PostgreSQL only)', () => {
  let database: TestDatabase;
  let dataDir: string;
  let receiver: WebhookReceiver;
  let service: ServiceProcess | undefined;

  beforeAll(async () => {
    database = await createTestDatabase();
    dataDir = mkdtempSync(path.join(tmpdir(), 'auth-webhook-crash-'));
    receiver = await startWebhookReceiver();
  });
  afterAll(async () => {
    await stopService(service);
    await receiver?.close();
    await database?.drop();
    if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
  });

  const env = (): Record<string, string> => ({
    DATABASE_URL: database.url!,
    DATA_DIR: dataDir,
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    RATE_LIMIT_SIGN_UP_PER_IP: '0',
  });

  it('every event of an answered sign-up is delivered after the restart, signed, none lost', async () => {
    // The service generates the webhook key into DATA_DIR at its first start; the endpoint is added with the same key.
    service = await startService(env());
    const { webhook, secret } = await createWebhooksService({ db: database.db, clock: systemClock, secretKey: loadWebhookSecretKey({ dataDir }) }).add({
      url: receiver.url(),
      eventTypes: ['user.created'],
    });

    // The receiver takes requests and never answers while the first process lives.
    receiver.answer = { status: 204, delayMs: 120_000 };
    const confirmed: string[] = [];
    let issued = 0;
    const loop = async (): Promise<void> => {
      while (issued < SIGN_UPS) {
        issued++;
        const username = uniqueName('hook');
        const res = await fetch(`${service!.url}/auth/v0/sign-up`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ username, phone: `+1555${String(issued).padStart(7, '0')}`, password: PASSWORD }),
        });
        expect(res.status).toBe(201);
        confirmed.push(((await res.json()) as { user: { id: string } }).user.id);
      }
    };
    await Promise.all(Array.from({ length: LOOPS }, loop));
    // Some attempts reach the stalled receiver (the worker polls every second), then the kill.
    await waitUntil('attempts in flight', 10_000, () => receiver.received.length >= MAX_IN_FLIGHT / 2);
    service.child.kill('SIGKILL');
    expect(await service.exited).toEqual({ code: null, signal: 'SIGKILL' });
    service = undefined;

    const db = database.db;
    // Every answered sign-up has its event.
    const events = await db.query<{ id: string; user_id: string }>(`SELECT id, data->'user'->>'id' AS user_id FROM webhook_events WHERE type = 'user.created'`);
    expect(events.rows.map((r) => r.user_id).sort()).toEqual([...confirmed].sort());
    // At the kill: attempts in flight (leased by the dead process) and events not attempted yet.
    const leased = await db.query<{ id: string; lease_expires_at: Date }>(`SELECT id, lease_expires_at FROM webhook_deliveries WHERE lease_owner IS NOT NULL`);
    expect(leased.rows.length).toBeGreaterThan(0);
    const unattempted = await db.query<{ n: number }>(
      `SELECT (SELECT count(*) FROM webhook_events WHERE pending_endpoint_ids IS NOT NULL)::int
            + (SELECT count(*) FROM webhook_deliveries WHERE status = 'pending' AND lease_owner IS NULL AND attempts = 0)::int AS n`,
    );
    expect(unattempted.rows[0]!.n).toBeGreaterThan(0);
    const stalled = new Set(receiver.received.map((r) => String(r.headers['webhook-id'])));

    // Restart; the receiver answers now.
    receiver.answer = { status: 204 };
    receiver.received.length = 0;
    service = await startService(env());
    const leasedIds = leased.rows.map((r) => r.id);
    const unleased = events.rows.length - leasedIds.length;
    await waitUntil('every delivery not leased by the dead process', DELIVERY_WAIT_MS, async () => {
      const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE status = 'delivered'`);
      return rows[0]!.n >= unleased;
    });
    // The dead process's leases still hold: those deliveries wait for them to end.
    const waiting = await db.query<{ id: string }>(`SELECT id FROM webhook_deliveries WHERE id = ANY($1::uuid[]) AND status = 'pending'`, [leasedIds]);
    expect(waiting.rows).toHaveLength(leasedIds.length);
    for (const r of leased.rows) expect(r.lease_expires_at.getTime() - Date.now()).toBeLessThanOrEqual(DELIVERY_LEASE_MS);
    await db.query('UPDATE webhook_deliveries SET lease_expires_at = $2 WHERE id = ANY($1::uuid[])', [leasedIds, new Date(Date.now() - 1_000)]);
    await waitUntil('every delivery', DELIVERY_WAIT_MS, async () => {
      const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE status <> 'delivered' OR lease_owner IS NOT NULL`);
      const all = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_deliveries`);
      return rows[0]!.n === 0 && all.rows[0]!.n === events.rows.length;
    });

    // Each event reached the receiver after the restart, signed with the endpoint's secret; the
    // attempts in flight at the kill were never answered, so they were made again (at least once).
    const ids = receiver.received.map((r) => {
      verifyWebhook({ secret, headers: r.headers as Record<string, string>, body: r.body });
      return String(r.headers['webhook-id']);
    });
    expect([...new Set(ids)].sort()).toEqual(events.rows.map((r) => r.id).sort());
    expect(ids).toHaveLength(events.rows.length);
    for (const id of stalled) expect(ids).toContain(id);
    // One recorded attempt per delivery: the killed ones were never recorded.
    const attempts = await db.query<{ attempts: number }>('SELECT attempts FROM webhook_deliveries WHERE endpoint_id = $1', [webhook.id]);
    expect(attempts.rows.every((r) => r.attempts === 1)).toBe(true);

    service.child.kill('SIGTERM');
    expect(await service.exited).toEqual({ code: 0, signal: null });
    service = undefined;
  });
});
