/**
 * The admin API's webhook routes (docs/admin-api.md#webhooks) through HTTP, on the same buildApp
 * as production with ADMIN_PORT set: every route with its statuses and codes, the `webhooks`
 * scope, an audit entry with each change (none for a refusal, a read or a no-op) that never holds
 * a secret, the secret answered only at creation and rotation, and a delivery retried through the
 * API reaching a real receiver on 127.0.0.1.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createAdminKey, type AdminScope } from '../../src/modules/admin/admin-keys.service.js';
import { verifyWebhook } from '../../packages/verify/src/webhook.js';
import { adminRequest } from '../helpers/admin.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { expectError, keysOf, signUp, uniqueName } from '../helpers/flows.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

let ctx: TestContext;
let admin: FastifyInstance;
let receiver: WebhookReceiver;
/** A key with the `webhooks` scope only. */
let key: string;
let keyId: string;

beforeAll(async () => {
  ctx = await createTestContext({ ADMIN_PORT: '0', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, { startOutboxWorker: false, startWebhookWorker: false });
  admin = ctx.app.admin!;
  receiver = await startWebhookReceiver();
  ({ key, id: keyId } = await newKey(['webhooks']));
});
afterAll(async () => {
  await ctx?.close();
  await receiver?.close();
});
beforeEach(async () => {
  // Each test starts without endpoints, in a fresh window of the per-key rate limit.
  await ctx.db.query('DELETE FROM webhook_endpoints');
  receiver.received.length = 0;
  receiver.answer = { status: 204 };
  ctx.clock.advance(60);
});

async function newKey(scopes: AdminScope[]): Promise<{ id: string; key: string }> {
  return createAdminKey(ctx.db, { name: uniqueName('key'), scopes, expiresAt: null, now: ctx.clock.now() });
}

/** One admin request with `key` (or none) and a JSON body when given. */
function call(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, options: { key?: string | null; body?: unknown } = {}): Promise<LightMyRequestResponse> {
  return adminRequest(admin, method, url, { ...options, key: options.key === undefined ? key : options.key });
}

interface AuditRow {
  action: string;
  key_id: string | null;
  key_name: string;
  user_id: string | null;
  request_id: string | null;
  details: Record<string, unknown>;
}

/** The webhook audit entries, oldest first, straight from the table. */
async function webhookAudit(): Promise<AuditRow[]> {
  const { rows } = await ctx.db.query<AuditRow>(
    "SELECT action, key_id, key_name, user_id, request_id, details FROM admin_audit_log WHERE action LIKE 'webhook.%' OR action = 'delivery.retry' ORDER BY at, id",
  );
  return rows;
}

/** Adds an endpoint through the API; returns its id and secret. */
async function addWebhook(path = '/hook', eventTypes: string[] = ['*']): Promise<{ id: string; secret: string }> {
  const res = await call('POST', '/admin/v0/webhooks', { body: { url: receiver.url(path), event_types: eventTypes } });
  expect(res.statusCode, res.body).toBe(201);
  const body = res.json() as { webhook: { id: string }; secret: string };
  return { id: body.webhook.id, secret: body.secret };
}

const ENDPOINT_MEMBERS = ['created_at', 'enabled', 'event_types', 'id', 'url'];
const UNKNOWN = '00000000-0000-4000-8000-000000000000';

describe('/admin/v0/webhooks', () => {
  it('add (201, the secret once), list (never a secret), change, rotate (200, a new secret), remove (204); each change audited, without a secret', async () => {
    const before = await webhookAudit();
    const created = await call('POST', '/admin/v0/webhooks', { body: { url: receiver.url('/a'), event_types: ['user.created', 'user.deleted'] } });
    expect(created.statusCode, created.body).toBe(201);
    const { webhook, secret } = created.json() as { webhook: Record<string, unknown> & { id: string }; secret: string };
    expect(keysOf(created.json())).toEqual(['secret', 'webhook']);
    expect(keysOf(webhook)).toEqual(ENDPOINT_MEMBERS);
    expect(webhook).toMatchObject({ url: receiver.url('/a'), event_types: ['user.created', 'user.deleted'], enabled: true });
    expect(secret).toMatch(/^whsec_/);

    const list = await call('GET', '/admin/v0/webhooks');
    expect(list.statusCode).toBe(200);
    expect(list.json()).toEqual({ webhooks: [webhook] });
    expect(list.body).not.toContain('whsec_');

    ctx.clock.advance(1);
    const changed = await call('PATCH', `/admin/v0/webhooks/${webhook.id.toUpperCase()}`, { body: { url: receiver.url('/b'), event_types: ['*'], enabled: false } });
    expect(changed.statusCode, changed.body).toBe(200);
    expect(changed.json()).toEqual({ webhook: { ...webhook, url: receiver.url('/b'), event_types: ['*'], enabled: false } });
    // The same change again changes nothing: answered, not audited.
    expect((await call('PATCH', `/admin/v0/webhooks/${webhook.id}`, { body: { enabled: false } })).statusCode).toBe(200);

    ctx.clock.advance(1);
    const rotated = await call('POST', `/admin/v0/webhooks/${webhook.id}/rotate-secret`);
    expect(rotated.statusCode, rotated.body).toBe(200);
    expect(keysOf(rotated.json())).toEqual(['secret']);
    const newSecret = (rotated.json() as { secret: string }).secret;
    expect(newSecret).toMatch(/^whsec_/);
    expect(newSecret).not.toBe(secret);
    // An empty JSON body is accepted as none.
    ctx.clock.advance(1);
    expect((await call('POST', `/admin/v0/webhooks/${webhook.id}/rotate-secret`, { body: {} })).statusCode).toBe(200);

    ctx.clock.advance(1);
    const removed = await call('DELETE', `/admin/v0/webhooks/${webhook.id}`);
    expect(removed.statusCode, removed.body).toBe(204);
    expect(removed.body).toBe('');
    expect((await call('GET', '/admin/v0/webhooks')).json()).toEqual({ webhooks: [] });

    const entries = (await webhookAudit()).slice(before.length);
    expect(entries.map((e) => e.action)).toEqual(['webhook.create', 'webhook.update', 'webhook.rotate_secret', 'webhook.rotate_secret', 'webhook.delete']);
    for (const e of entries) expect(e).toMatchObject({ key_id: keyId, user_id: null, request_id: expect.any(String) });
    expect(entries[0]!.details).toEqual({ webhook_id: webhook.id, url: receiver.url('/a'), event_types: ['user.created', 'user.deleted'] });
    expect(entries[1]!.details).toEqual({ webhook_id: webhook.id, changed: ['url', 'event_types', 'enabled'], url: receiver.url('/b'), event_types: ['*'], enabled: false });
    expect(entries[2]!.details).toEqual({ webhook_id: webhook.id });
    expect(entries[4]!.details).toEqual({ webhook_id: webhook.id, url: receiver.url('/b') });
    const text = JSON.stringify(entries);
    expect(text).not.toContain('whsec_');
    expect(text).not.toContain(secret.slice(6));
    expect(text).not.toContain(newSecret.slice(6));
  });

  it('deliveries: a page newest first with next_cursor, the status filter; a retry (202) reaches the receiver, signed with the secret', async () => {
    const { id, secret } = await addWebhook('/deliveries', ['user.created']);
    receiver.answerNext({ status: 500 });
    for (let i = 0; i < 3; i++) {
      await signUp(ctx);
      ctx.clock.advance(1);
    }
    await ctx.app.webhookDelivery.runOnce();
    const all = await call('GET', `/admin/v0/webhooks/${id}/deliveries`);
    expect(all.statusCode, all.body).toBe(200);
    const { deliveries, next_cursor } = all.json() as { deliveries: { id: string; status: string; created_at: string }[]; next_cursor: string | null };
    expect(deliveries).toHaveLength(3);
    expect(next_cursor).toBeNull();
    expect(deliveries.map((d) => d.created_at)).toEqual([...deliveries.map((d) => d.created_at)].sort().reverse());

    const first = (await call('GET', `/admin/v0/webhooks/${id}/deliveries?limit=2`)).json() as { deliveries: { id: string }[]; next_cursor: string };
    expect(first.deliveries.map((d) => d.id)).toEqual(deliveries.slice(0, 2).map((d) => d.id));
    const second = (await call('GET', `/admin/v0/webhooks/${id}/deliveries?limit=2&cursor=${first.next_cursor}`)).json() as { deliveries: { id: string }[]; next_cursor: string | null };
    expect(second).toEqual({ deliveries: [expect.objectContaining({ id: deliveries[2]!.id })], next_cursor: null });

    const pending = (await call('GET', `/admin/v0/webhooks/${id}/deliveries?status=pending`)).json() as { deliveries: { id: string }[] };
    expect(pending.deliveries).toHaveLength(1);
    const delivered = (await call('GET', `/admin/v0/webhooks/${id}/deliveries?status=delivered`)).json() as { deliveries: { id: string; status: string }[] };
    expect(delivered.deliveries).toHaveLength(2);
    const target = delivered.deliveries[0]!;

    const before = (await webhookAudit()).length;
    receiver.received.length = 0;
    const retried = await call('POST', `/admin/v0/webhooks/${id}/deliveries/${target.id.toUpperCase()}/retry`);
    expect(retried.statusCode, retried.body).toBe(202);
    expect(retried.body).toBe('');
    const entries = (await webhookAudit()).slice(before);
    expect(entries).toEqual([expect.objectContaining({ action: 'delivery.retry', key_id: keyId, user_id: null, details: { webhook_id: id, delivery_id: target.id } })]);

    await ctx.app.webhookDelivery.runOnce();
    const got = receiver.to('/deliveries');
    expect(got).toHaveLength(1);
    expect(verifyWebhook({ secret, headers: got[0]!.headers as Record<string, string>, body: got[0]!.body, now: ctx.clock.now() }).event.type).toBe('user.created');
    const after = (await call('GET', `/admin/v0/webhooks/${id}/deliveries?status=delivered`)).json() as { deliveries: { id: string; attempts: number }[] };
    expect(after.deliveries.find((d) => d.id === target.id)?.attempts).toBe(2);
  });

  it('every route needs a key (401) with the webhooks scope (403), before any 400 or 404; nothing changes, nothing is audited', async () => {
    const { id } = await addWebhook();
    const { key: other } = await newKey(['users:read', 'users:write', 'sessions:write', 'audit:read']);
    const before = await webhookAudit();
    const routes: ['GET' | 'POST' | 'PATCH' | 'DELETE', string, unknown][] = [
      ['GET', '/admin/v0/webhooks', undefined],
      ['POST', '/admin/v0/webhooks', { url: receiver.url(), event_types: ['*'] }],
      ['PATCH', `/admin/v0/webhooks/${id}`, { enabled: false }],
      ['DELETE', `/admin/v0/webhooks/${id}`, undefined],
      ['POST', `/admin/v0/webhooks/${id}/rotate-secret`, undefined],
      ['GET', `/admin/v0/webhooks/${id}/deliveries`, undefined],
      ['POST', `/admin/v0/webhooks/${id}/deliveries/${UNKNOWN}/retry`, undefined],
      ['PATCH', '/admin/v0/webhooks/not-a-uuid', { nope: 1 }],
    ];
    for (const [method, url, body] of routes) {
      expectError(await call(method, url, { key: null, body }), 401, 'admin.invalid_api_key');
      expectError(await call(method, url, { key: 'lk_admin_nope', body }), 401, 'admin.invalid_api_key');
      expectError(await call(method, url, { key: other, body }), 403, 'admin.insufficient_scope');
    }
    expect((await call('GET', '/admin/v0/webhooks')).json()).toEqual({ webhooks: [expect.objectContaining({ id, enabled: true })] });
    expect(await webhookAudit()).toEqual(before);
  });

  it('refusals: 400 admin.validation_failed for bad bodies, queries and ids; 404 admin.not_found for unknown webhooks and deliveries; nothing changes, nothing is audited', async () => {
    const { id } = await addWebhook('/one');
    ctx.clock.advance(1);
    const { id: otherId } = await addWebhook('/two');
    await signUp(ctx);
    await ctx.app.webhookDelivery.runOnce();
    const { rows } = await ctx.db.query<{ id: string }>('SELECT id FROM webhook_deliveries WHERE endpoint_id = $1', [otherId]);
    const othersDelivery = rows[0]!.id;
    const before = await webhookAudit();
    const invalid: ['GET' | 'POST' | 'PATCH' | 'DELETE', string, unknown][] = [
      ['POST', '/admin/v0/webhooks', { url: receiver.url(), event_types: ['*'], secret: 'x' }],
      ['POST', '/admin/v0/webhooks', { url: receiver.url() }],
      ['POST', '/admin/v0/webhooks', { url: 'http://example.com/hook', event_types: ['*'] }],
      ['POST', '/admin/v0/webhooks', { url: 'not a url', event_types: ['*'] }],
      ['POST', '/admin/v0/webhooks', { url: receiver.url(), event_types: [] }],
      ['POST', '/admin/v0/webhooks', { url: receiver.url(), event_types: ['user.renamed'] }],
      ['POST', '/admin/v0/webhooks', { url: receiver.url(), event_types: ['*', 'user.created'] }],
      ['POST', '/admin/v0/webhooks', { url: receiver.url(), event_types: ['user.created', 'user.created'] }],
      ['PATCH', `/admin/v0/webhooks/${id}`, { enabled: 'no' }],
      ['PATCH', `/admin/v0/webhooks/${id}`, { secret: 'x' }],
      ['PATCH', `/admin/v0/webhooks/${id}`, { url: 'ftp://127.0.0.1/x' }],
      ['PATCH', '/admin/v0/webhooks/not-a-uuid', { enabled: false }],
      ['DELETE', '/admin/v0/webhooks/not-a-uuid', undefined],
      ['DELETE', `/admin/v0/webhooks/${id}`, { force: true }],
      ['POST', '/admin/v0/webhooks/123/rotate-secret', undefined],
      ['POST', `/admin/v0/webhooks/${id}/rotate-secret`, { secret: 'mine' }],
      ['GET', '/admin/v0/webhooks/not-a-uuid/deliveries', undefined],
      ['GET', `/admin/v0/webhooks/${id}/deliveries?limit=0`, undefined],
      ['GET', `/admin/v0/webhooks/${id}/deliveries?limit=201`, undefined],
      ['GET', `/admin/v0/webhooks/${id}/deliveries?limit=ten`, undefined],
      ['GET', `/admin/v0/webhooks/${id}/deliveries?status=failed`, undefined],
      ['GET', `/admin/v0/webhooks/${id}/deliveries?cursor=not-one-of-ours`, undefined],
      ['GET', `/admin/v0/webhooks/${id}/deliveries?sort=asc`, undefined],
      ['POST', `/admin/v0/webhooks/${id}/deliveries/not-a-uuid/retry`, undefined],
      ['POST', `/admin/v0/webhooks/${id}/deliveries/${othersDelivery}/retry`, { now: true }],
    ];
    for (const [method, url, body] of invalid) {
      const res = await call(method, url, { body });
      expectError(res, 400, 'admin.validation_failed');
      expect(res.body, `${method} ${url}`).not.toContain('whsec_');
    }
    const missing: ['GET' | 'POST' | 'PATCH' | 'DELETE', string, unknown][] = [
      ['PATCH', `/admin/v0/webhooks/${UNKNOWN}`, { enabled: false }],
      ['DELETE', `/admin/v0/webhooks/${UNKNOWN}`, undefined],
      ['POST', `/admin/v0/webhooks/${UNKNOWN}/rotate-secret`, undefined],
      ['GET', `/admin/v0/webhooks/${UNKNOWN}/deliveries`, undefined],
      ['POST', `/admin/v0/webhooks/${UNKNOWN}/deliveries/${othersDelivery}/retry`, undefined],
      ['POST', `/admin/v0/webhooks/${id}/deliveries/${randomUUID()}/retry`, undefined],
      // A delivery of another webhook is not one of this webhook's.
      ['POST', `/admin/v0/webhooks/${id}/deliveries/${othersDelivery}/retry`, undefined],
    ];
    for (const [method, url, body] of missing) expectError(await call(method, url, { body }), 404, 'admin.not_found');

    expect(((await call('GET', '/admin/v0/webhooks')).json() as { webhooks: unknown[] }).webhooks).toEqual([
      expect.objectContaining({ id, url: receiver.url('/one'), event_types: ['*'], enabled: true }),
      expect.objectContaining({ id: otherId }),
    ]);
    expect(await webhookAudit()).toEqual(before);
  });
});
