import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { createLogger } from '../../src/app.js';
import { createDeliveryWorker, RETRY_SCHEDULE_SECONDS, type DeliveryWorker, type DeliveryWorkerDeps } from '../../src/modules/webhooks/delivery.worker.js';
import { WebhookRequestError, type WebhookChange } from '../../src/modules/webhooks/webhooks.service.js';
import { verifyWebhook, WebhookVerifyError } from '../../packages/verify/src/webhook.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { keysOf, signUp } from '../helpers/flows.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

/**
 * Webhook endpoints and deliveries (docs/api.md#events-and-webhooks): the management service
 * behind the CLI and the admin API, and the delivery worker against real HTTP receivers on
 * 127.0.0.1: headers and signatures, the retry schedule on the test clock, Retry-After, 410,
 * disabled endpoints, time limits, redirects, refused destinations, and two workers at once.
 */

/**
 * An attempt's time limit in these tests (production: 10 s): short, for the test that waits for
 * it, but far above what the loopback receiver takes to answer on a busy 2-core machine (0.3 s
 * was once exceeded there).
 */
const TIMEOUT_MS = 1500;

let ctx: TestContext;
let receiver: WebhookReceiver;
beforeAll(async () => {
  ctx = await createTestContext({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, { startWebhookWorker: false, webhookDelivery: { attemptTimeoutMs: TIMEOUT_MS } });
  receiver = await startWebhookReceiver();
});
afterAll(async () => {
  await ctx?.close();
  await receiver?.close();
});
afterEach(async () => {
  // Each test starts without endpoints, events or queued answers.
  await ctx.db.query('DELETE FROM webhook_endpoints');
  await ctx.db.query('DELETE FROM webhook_events');
  receiver.received.length = 0;
  receiver.answer = { status: 204 };
});

const webhooks = () => ctx.app.webhooks;
/** Records one event (a sign-up's user.created) and returns the user's id. */
const causeEvent = async (): Promise<string> => {
  const { res, body } = await signUp(ctx);
  expect(res.statusCode).toBe(201);
  return body.user.id;
};
const runOnce = () => ctx.app.webhookDelivery.runOnce();
const deliveriesOf = async (webhookId: string) => (await webhooks().listDeliveries(webhookId, {})).deliveries;
/** The reason of a refused request, or 'accepted'. */
const refusal = async (call: () => Promise<unknown>): Promise<string> => {
  try {
    await call();
    return 'accepted';
  } catch (err) {
    if (err instanceof WebhookRequestError) return `${err.reason}: ${err.message}`;
    throw err;
  }
};
/** Another delivery worker on the test database and clock. */
const worker = (extra: Partial<DeliveryWorkerDeps> = {}): DeliveryWorker =>
  createDeliveryWorker({
    db: ctx.db,
    clock: ctx.clock,
    log: createLogger('silent'),
    secretKey: ctx.app.keys.webhookSecretKey,
    allowPrivateNetworks: true,
    attemptTimeoutMs: TIMEOUT_MS,
    ...extra,
  });

// First: the standardwebhooks package checks the timestamp against the real clock, which the
// test clock leaves behind once a test advances it.
describe('the request', () => {
  it('one POST per event with the Standard Webhooks headers; the body is {type, timestamp, data}; both verifiers accept it', async () => {
    const { secret } = await webhooks().add({ url: receiver.url(), eventTypes: ['*'] });
    const userId = await causeEvent();
    await runOnce();
    expect(receiver.received).toHaveLength(1);
    const [r] = receiver.received;
    expect(r!.method).toBe('POST');
    expect(r!.headers).toMatchObject({ 'content-type': 'application/json', 'webhook-timestamp': String(Math.floor(ctx.clock.now().getTime() / 1000)) });
    const { rows } = await ctx.db.query<{ id: string; occurred_at: Date }>(`SELECT id, occurred_at FROM webhook_events WHERE type = 'user.created' AND data->'user'->>'id' = $1`, [userId]);
    expect(r!.headers['webhook-id']).toBe(rows[0]!.id);
    expect(r!.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(Object.keys(r!.json)).toEqual(['type', 'timestamp', 'data']);
    expect(r!.json).toMatchObject({ type: 'user.created', timestamp: rows[0]!.occurred_at.toISOString() });
    const headers = r!.headers as Record<string, string>;
    expect(new Webhook(secret).verify(r!.body, headers)).toEqual(r!.json);
    expect(verifyWebhook({ secret, headers, body: r!.body }).id).toBe(rows[0]!.id);
    // A body changed by one byte, or another secret, fails both.
    const tampered = r!.body.replace('user.created', 'user.deleted');
    expect(() => new Webhook(secret).verify(tampered, headers)).toThrow();
    expect(() => verifyWebhook({ secret, headers, body: tampered })).toThrow(WebhookVerifyError);
  });
});

describe('endpoint management', () => {
  it('add: refuses a bad URL or event types (nothing stored); returns the Endpoint exactly and its secret once, stored encrypted', async () => {
    const cases: [string, string[]][] = [
      ['http://example.com/hook', ['*']],
      ['ftp://127.0.0.1/hook', ['*']],
      ['https://user:pass@example.com/hook', ['*']],
      ['https://example.com/hook#x', ['*']],
      ['/relative', ['*']],
      [`https://example.com/${'a'.repeat(2048)}`, ['*']],
      ['https://example.com/hook', []],
      ['https://example.com/hook', ['*', 'user.created']],
      ['https://example.com/hook', ['user.renamed']],
      ['https://example.com/hook', ['user.created', 'user.created']],
    ];
    for (const [url, eventTypes] of cases) expect(await refusal(() => webhooks().add({ url, eventTypes })), url).toMatch(/^validation_failed: /);
    expect(await webhooks().list()).toEqual([]);

    for (const url of ['http://localhost:9/a', 'http://127.0.0.2/a', 'http://[::1]:9/a', 'https://hooks.example.com/a?b=c']) {
      expect(await refusal(() => webhooks().add({ url, eventTypes: ['user.created'] })), url).toBe('accepted');
    }
    const { webhook, secret } = await webhooks().add({ url: 'https://Hooks.Example.com/in', eventTypes: ['user.created', 'user.deleted'] });
    expect(keysOf(webhook)).toEqual(['created_at', 'enabled', 'event_types', 'id', 'url']);
    expect(webhook).toMatchObject({ url: 'https://hooks.example.com/in', event_types: ['user.created', 'user.deleted'], enabled: true });
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(secret.slice(6), 'base64')).toHaveLength(32);
    expect(await webhooks().get(webhook.id)).toEqual(webhook);
    expect((await webhooks().list()).map((w) => w.id)).toContain(webhook.id);
    const { rows } = await ctx.db.query<{ secret: string }>('SELECT secret FROM webhook_endpoints WHERE id = $1', [webhook.id]);
    expect(rows[0]!.secret).toMatch(/^v1\./);
    expect(rows[0]!.secret).not.toContain(secret.slice(6, 20));
  });

  it('update and remove: validation, not found, audit in the change\'s transaction (a failing audit undoes the change), no audit when nothing changed', async () => {
    const audits: WebhookChange[] = [];
    const audit = async (_tx: unknown, change: WebhookChange) => void audits.push(change);
    const { webhook } = await webhooks().add({ url: receiver.url('/a'), eventTypes: ['*'] }, { audit });
    expect(audits).toEqual([{ action: 'webhook.create', webhookId: webhook.id, details: { webhook_id: webhook.id, url: receiver.url('/a'), event_types: ['*'] } }]);

    expect(await refusal(() => webhooks().update('not-a-uuid', { enabled: false }))).toMatch(/^validation_failed: webhook_id/);
    expect(await refusal(() => webhooks().update('00000000-0000-4000-8000-000000000000', { enabled: false }))).toBe('not_found: The webhook does not exist.');
    expect(await refusal(() => webhooks().update(webhook.id, { url: 'http://example.com/' }))).toMatch(/^validation_failed: url must use https/);

    const updated = await webhooks().update(webhook.id, { url: receiver.url('/b'), eventTypes: ['session.created'], enabled: false }, { audit });
    expect(updated).toEqual({ ...webhook, url: receiver.url('/b'), event_types: ['session.created'], enabled: false });
    expect(audits[1]).toEqual({
      action: 'webhook.update',
      webhookId: webhook.id,
      details: { webhook_id: webhook.id, changed: ['url', 'event_types', 'enabled'], url: receiver.url('/b'), event_types: ['session.created'], enabled: false },
    });
    await webhooks().update(webhook.id, { enabled: false, eventTypes: ['session.created'] }, { audit });
    expect(audits).toHaveLength(2);

    const failing = async () => {
      throw new Error('audit store down');
    };
    await expect(webhooks().update(webhook.id, { enabled: true }, { audit: failing })).rejects.toThrow('audit store down');
    expect((await webhooks().get(webhook.id)).enabled).toBe(false);
    await expect(webhooks().remove(webhook.id, { audit: failing })).rejects.toThrow('audit store down');
    expect((await webhooks().get(webhook.id)).id).toBe(webhook.id);

    await webhooks().remove(webhook.id, { audit });
    expect(audits[2]).toEqual({ action: 'webhook.delete', webhookId: webhook.id, details: { webhook_id: webhook.id, url: receiver.url('/b') } });
    expect(await refusal(() => webhooks().get(webhook.id))).toBe('not_found: The webhook does not exist.');
    expect(await refusal(() => webhooks().remove(webhook.id))).toBe('not_found: The webhook does not exist.');
  });

  it('remove drops the pending deliveries: they are never attempted again', async () => {
    receiver.answer = { status: 500 };
    const { webhook } = await webhooks().add({ url: receiver.url(), eventTypes: ['*'] });
    await causeEvent();
    await runOnce();
    expect((await deliveriesOf(webhook.id))[0]).toMatchObject({ status: 'pending', attempts: 1 });
    await webhooks().remove(webhook.id);
    const { rows } = await ctx.db.query('SELECT 1 FROM webhook_deliveries WHERE endpoint_id = $1', [webhook.id]);
    expect(rows).toEqual([]);
    ctx.clock.advance(3600);
    expect(await runOnce()).toBe(0);
    expect(receiver.received).toHaveLength(1);
  });

  it('deliveries: newest first, status filter, keyset cursor, limit 1 to 200 (default 50); bad query values and unknown webhooks refused', async () => {
    const { webhook } = await webhooks().add({ url: receiver.url(), eventTypes: ['user.created'] });
    receiver.answerNext({ status: 500 }, { status: 500 });
    for (let i = 0; i < 5; i++) {
      await causeEvent();
      ctx.clock.advance(1);
    }
    await runOnce();
    const all = await deliveriesOf(webhook.id);
    expect(all).toHaveLength(5);
    expect(keysOf(all[0])).toEqual(['attempts', 'created_at', 'event_id', 'event_type', 'id', 'last_attempt_at', 'last_error', 'last_status', 'next_attempt_at', 'status']);
    expect(all.map((d) => d.created_at)).toEqual([...all.map((d) => d.created_at)].sort().reverse());
    expect(all.filter((d) => d.status === 'pending')).toHaveLength(2);

    const pages: string[][] = [];
    let cursor: string | undefined;
    do {
      const page = await webhooks().listDeliveries(webhook.id, { limit: '2', ...(cursor === undefined ? {} : { cursor }) });
      pages.push(page.deliveries.map((d) => d.id));
      cursor = page.next_cursor ?? undefined;
    } while (cursor !== undefined);
    expect(pages.map((p) => p.length)).toEqual([2, 2, 1]);
    expect(pages.flat()).toEqual(all.map((d) => d.id));
    const exact = await webhooks().listDeliveries(webhook.id, { limit: 5 });
    expect(exact.next_cursor).toBeNull();

    const pending = await webhooks().listDeliveries(webhook.id, { status: 'pending' });
    expect(pending.deliveries.map((d) => d.id)).toEqual(all.filter((d) => d.status === 'pending').map((d) => d.id));
    expect((await webhooks().listDeliveries(webhook.id, { status: 'dead' })).deliveries).toEqual([]);

    for (const query of [{ limit: '0' }, { limit: '201' }, { limit: 'ten' }, { limit: '-1' }, { status: 'failed' }, { cursor: 'not-a-cursor' }, { cursor: 'AAAA' }]) {
      expect(await refusal(() => webhooks().listDeliveries(webhook.id, query)), JSON.stringify(query)).toMatch(/^validation_failed: /);
    }
    expect((await webhooks().listDeliveries(webhook.id, { limit: '200' })).deliveries).toHaveLength(5);
    expect(await refusal(() => webhooks().listDeliveries('00000000-0000-4000-8000-000000000000', {}))).toBe('not_found: The webhook does not exist.');
  });

  it('retry: a new attempt due now, for a delivered or a dead delivery too; a delivery of another webhook is not found', async () => {
    const audits: WebhookChange[] = [];
    const { webhook } = await webhooks().add({ url: receiver.url(), eventTypes: ['user.created'] });
    const other = (await webhooks().add({ url: receiver.url('/other'), eventTypes: ['session.created'] })).webhook;
    await causeEvent();
    await runOnce();
    const [delivered] = await deliveriesOf(webhook.id);
    expect(delivered).toMatchObject({ status: 'delivered', attempts: 1, next_attempt_at: null });

    await webhooks().retryDelivery(webhook.id, delivered!.id, { audit: async (_tx, c) => void audits.push(c) });
    expect(audits).toEqual([{ action: 'delivery.retry', webhookId: webhook.id, details: { webhook_id: webhook.id, delivery_id: delivered!.id } }]);
    expect((await deliveriesOf(webhook.id))[0]).toMatchObject({ status: 'pending', next_attempt_at: ctx.clock.now().toISOString() });
    await runOnce();
    expect((await deliveriesOf(webhook.id))[0]).toMatchObject({ status: 'delivered', attempts: 2 });
    expect(receiver.received.map((r) => r.headers['webhook-id'])).toEqual([delivered!.event_id, delivered!.event_id]);

    expect(await refusal(() => webhooks().retryDelivery(other.id, delivered!.id))).toBe('not_found: The delivery does not exist.');
    expect(await refusal(() => webhooks().retryDelivery(webhook.id, 'nope'))).toMatch(/^validation_failed: delivery_id/);
  });
});

describe('delivery', () => {
  it('only to endpoints enabled and subscribed to the type when the event was recorded', async () => {
    const all = (await webhooks().add({ url: receiver.url('/all'), eventTypes: ['*'] })).webhook;
    const sessions = (await webhooks().add({ url: receiver.url('/sessions'), eventTypes: ['session.created'] })).webhook;
    const off = (await webhooks().add({ url: receiver.url('/off'), eventTypes: ['*'] })).webhook;
    await webhooks().update(off.id, { enabled: false });
    await causeEvent();
    // Enabled after the event was recorded: the event is not brought back.
    await webhooks().update(off.id, { enabled: true });
    await runOnce();
    expect(receiver.to('/all').map((r) => r.json.type)).toEqual(['user.created']);
    expect(receiver.to('/sessions')).toEqual([]);
    expect(receiver.to('/off')).toEqual([]);
    expect(await deliveriesOf(sessions.id)).toEqual([]);
    expect((await deliveriesOf(all.id))[0]).toMatchObject({ status: 'delivered', event_type: 'user.created', last_status: 204 });
  });

  it('retries 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h after each failed attempt, then the delivery is dead; the same webhook-id every time', async () => {
    receiver.answer = { status: 500 };
    const { webhook } = await webhooks().add({ url: receiver.url(), eventTypes: ['user.created'] });
    await causeEvent();
    expect(await runOnce()).toBe(1);
    for (const [i, delay] of RETRY_SCHEDULE_SECONDS.entries()) {
      const [d] = await deliveriesOf(webhook.id);
      expect(d).toMatchObject({ status: 'pending', attempts: i + 1, last_status: 500, last_error: null, last_attempt_at: ctx.clock.now().toISOString() });
      expect(d!.next_attempt_at).toBe(new Date(ctx.clock.now().getTime() + delay * 1000).toISOString());
      ctx.clock.advance(delay - 1);
      expect(await runOnce(), `not before its time (retry ${i + 1})`).toBe(0);
      ctx.clock.advance(1);
      expect(await runOnce(), `retry ${i + 1}`).toBe(1);
    }
    const [dead] = await deliveriesOf(webhook.id);
    expect(dead).toMatchObject({ status: 'dead', attempts: 8, next_attempt_at: null, last_status: 500, last_error: null });
    ctx.clock.advance(86_400);
    expect(await runOnce()).toBe(0);
    expect(receiver.received).toHaveLength(8);
    expect(new Set(receiver.received.map((r) => r.headers['webhook-id'])).size).toBe(1);
    const metrics = await ctx.app.inject({ method: 'GET', url: '/metrics' });
    expect(metrics.body).toMatch(/auth_webhook_attempts_total\{outcome="retry"\} [1-9]/);
    expect(metrics.body).toMatch(/auth_webhook_attempts_total\{outcome="dead"\} [1-9]/);
    expect(metrics.body).toMatch(/auth_webhook_deliveries\{status="dead"\} 1/);
  });

  it('honours Retry-After (seconds or an HTTP-date) when it asks for a later retry than the schedule, not an earlier one', async () => {
    const { webhook } = await webhooks().add({ url: receiver.url(), eventTypes: ['user.created'] });
    const nextIn = async (): Promise<number> => {
      const [d] = await deliveriesOf(webhook.id);
      return (Date.parse(d!.next_attempt_at!) - ctx.clock.now().getTime()) / 1000;
    };
    receiver.answerNext({ status: 503, headers: { 'retry-after': '120' } });
    await causeEvent();
    await runOnce();
    expect(await nextIn()).toBe(120);
    ctx.clock.advance(120);
    receiver.answerNext({ status: 429, headers: { 'retry-after': '1' } });
    await runOnce();
    expect(await nextIn()).toBe(300);
    ctx.clock.advance(300);
    receiver.answerNext({ status: 503, headers: { 'retry-after': new Date(ctx.clock.now().getTime() + 3_600_000).toUTCString() } });
    await runOnce();
    expect(await nextIn()).toBe(3600);
  });

  it('a 410 makes the delivery dead at once and disables the endpoint: no delivery is created while it is disabled; enabled again, new events flow', async () => {
    const { webhook } = await webhooks().add({ url: receiver.url(), eventTypes: ['user.created'] });
    receiver.answerNext({ status: 410 });
    await causeEvent();
    await runOnce();
    expect((await deliveriesOf(webhook.id))[0]).toMatchObject({ status: 'dead', attempts: 1, last_status: 410, next_attempt_at: null });
    expect((await webhooks().get(webhook.id)).enabled).toBe(false);
    await causeEvent();
    await runOnce();
    expect(await deliveriesOf(webhook.id)).toHaveLength(1);
    await webhooks().update(webhook.id, { enabled: true });
    await causeEvent();
    await runOnce();
    expect((await deliveriesOf(webhook.id)).map((d) => d.status)).toEqual(['delivered', 'dead']);
    expect(receiver.received).toHaveLength(2);
  });

  it('deliveries pending for a disabled endpoint wait until it is enabled again', async () => {
    const { webhook } = await webhooks().add({ url: receiver.url(), eventTypes: ['user.created'] });
    receiver.answerNext({ status: 500 });
    await causeEvent();
    await runOnce();
    await webhooks().update(webhook.id, { enabled: false });
    ctx.clock.advance(3600);
    expect(await runOnce()).toBe(0);
    expect((await deliveriesOf(webhook.id))[0]).toMatchObject({ status: 'pending', attempts: 1 });
    await webhooks().update(webhook.id, { enabled: true });
    expect(await runOnce()).toBe(1);
    expect((await deliveriesOf(webhook.id))[0]).toMatchObject({ status: 'delivered', attempts: 2 });
  });

  it('an attempt without an answer within the time limit fails with last_error and no last_status; a redirect is not followed', async () => {
    const { webhook } = await webhooks().add({ url: receiver.url(), eventTypes: ['user.created'] });
    receiver.answerNext({ status: 204, delayMs: TIMEOUT_MS * 3 });
    await causeEvent();
    await runOnce();
    expect((await deliveriesOf(webhook.id))[0]).toMatchObject({ status: 'pending', last_status: null, last_error: `timeout: no answer within ${TIMEOUT_MS / 1000} s` });

    ctx.clock.advance(5);
    receiver.answerNext({ status: 302, headers: { location: receiver.url('/elsewhere') } });
    await runOnce();
    expect((await deliveriesOf(webhook.id))[0]).toMatchObject({ status: 'pending', attempts: 2, last_status: 302, last_error: null });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(receiver.to('/elsewhere')).toEqual([]);
  });

  it('a connection refused is a failed attempt with a short last_error', async () => {
    const { webhook } = await webhooks().add({ url: 'http://127.0.0.1:9/closed', eventTypes: ['user.created'] });
    await causeEvent();
    await runOnce();
    expect((await deliveriesOf(webhook.id))[0]).toMatchObject({ status: 'pending', last_status: null, last_error: 'connection error (ECONNREFUSED)' });
  });
});

describe('refused destinations (SSRF): checked on the resolved addresses at each attempt', () => {
  it('loopback refused unless WEBHOOK_ALLOW_PRIVATE_NETWORKS: `localhost` (a name resolving to 127.0.0.1) and a literal 127.0.0.1', async () => {
    const strict = worker({ allowPrivateNetworks: false });
    const port = new URL(receiver.origin).port;
    const named = (await webhooks().add({ url: `http://localhost:${port}/named`, eventTypes: ['user.created'] })).webhook;
    const literal = (await webhooks().add({ url: receiver.url('/literal'), eventTypes: ['user.created'] })).webhook;
    await causeEvent();
    expect(await strict.runOnce()).toBe(2);
    expect(receiver.received).toEqual([]);
    expect((await deliveriesOf(named.id))[0]!.last_error).toMatch(/^refused destination: (127\.0\.0\.1|::1) is a loopback address \(WEBHOOK_ALLOW_PRIVATE_NETWORKS is false\) \(localhost\)$/);
    expect((await deliveriesOf(literal.id))[0]).toMatchObject({ last_status: null, last_error: 'refused destination: 127.0.0.1 is a loopback address (WEBHOOK_ALLOW_PRIVATE_NETWORKS is false)' });
    await strict.stop();
    // With private networks allowed (the app's worker), the same deliveries go through.
    ctx.clock.advance(5);
    expect(await runOnce()).toBe(2);
    expect(receiver.received.map((r) => r.path).sort()).toEqual(['/literal', '/named']);
  });

  it('a name with any link-local address is refused even with private networks allowed, and nothing is sent; the connection goes to the checked address', async () => {
    const port = new URL(receiver.origin).port;
    const { webhook } = await webhooks().add({ url: `http://localhost:${port}/hook`, eventTypes: ['user.created'] });
    // The name is changed in the database: a URL rule at creation keeps http:// to loopback names.
    await ctx.db.query(`UPDATE webhook_endpoints SET url = $2 WHERE id = $1`, [webhook.id, `http://hooks.example.test:${port}/hook`]);
    // 127.0.0.1 first: were the link-local address not refused, the connection would reach the receiver, not leave the machine.
    const mixed = worker({ resolve: async () => [{ address: '127.0.0.1', family: 4 }, { address: '169.254.169.254', family: 4 }] });
    await causeEvent();
    await mixed.runOnce();
    await mixed.stop();
    expect(receiver.received).toEqual([]);
    expect((await deliveriesOf(webhook.id))[0]!.last_error).toBe('refused destination: 169.254.169.254 is a link-local address (hooks.example.test)');

    const checked = worker({ resolve: async (name) => (name === 'hooks.example.test' ? [{ address: '127.0.0.1', family: 4 }] : []) });
    ctx.clock.advance(5);
    expect(await checked.runOnce()).toBe(1);
    await checked.stop();
    expect(receiver.received.map((r) => r.headers.host)).toEqual([`hooks.example.test:${port}`]);
  });

  it('fe80::/10 and 169.254.0.0/16 literals are refused without a connection', async () => {
    const a = (await webhooks().add({ url: 'https://169.254.169.254/latest', eventTypes: ['user.created'] })).webhook;
    const b = (await webhooks().add({ url: 'https://[fe80::1]/hook', eventTypes: ['user.created'] })).webhook;
    await causeEvent();
    await runOnce();
    expect((await deliveriesOf(a.id))[0]!.last_error).toBe('refused destination: 169.254.169.254 is a link-local address');
    expect((await deliveriesOf(b.id))[0]!.last_error).toBe('refused destination: fe80::1 is a link-local address');
  });
});

describe('secret rotation', () => {
  it('signs with both secrets for 24 hours, the new one first; a second rotation within 24 hours drops the oldest', async () => {
    const { webhook, secret: first } = await webhooks().add({ url: receiver.url(), eventTypes: ['user.created'] });
    const { secret: second } = await webhooks().rotateSecret(webhook.id);
    expect(second).not.toBe(first);
    const signaturesOf = async (): Promise<string[]> => {
      await causeEvent();
      await runOnce();
      return String(receiver.received.at(-1)!.headers['webhook-signature']).split(' ');
    };
    const verifies = (secret: string, signature: string): boolean => {
      const r = receiver.received.at(-1)!;
      try {
        verifyWebhook({ secret, headers: { ...(r.headers as Record<string, string>), 'webhook-signature': signature }, body: r.body, now: ctx.clock.now() });
        return true;
      } catch {
        return false;
      }
    };
    let signatures = await signaturesOf();
    expect(signatures).toHaveLength(2);
    expect([verifies(second, signatures[0]!), verifies(first, signatures[1]!), verifies(first, signatures[0]!)]).toEqual([true, true, false]);

    ctx.clock.advance(3600);
    const { secret: third } = await webhooks().rotateSecret(webhook.id);
    signatures = await signaturesOf();
    expect(signatures).toHaveLength(2);
    expect([verifies(third, signatures[0]!), verifies(second, signatures[1]!)]).toEqual([true, true]);
    expect(signatures.some((s) => verifies(first, s))).toBe(false);

    ctx.clock.advance(24 * 3600);
    signatures = await signaturesOf();
    expect(signatures).toHaveLength(1);
    expect(verifies(third, signatures[0]!)).toBe(true);
  });
});

describe('several workers', () => {
  it('two workers never make the same attempt twice: every event arrives once, each delivery with one attempt', async () => {
    const { webhook } = await webhooks().add({ url: receiver.url(), eventTypes: ['user.created'] });
    receiver.answer = { status: 204, delayMs: 20 };
    const EVENTS = 24;
    for (let i = 0; i < EVENTS; i++) await causeEvent();
    const a = worker({ maxInFlight: 4 });
    const b = worker({ maxInFlight: 4 });
    for (let round = 0; round < 20 && receiver.received.length < EVENTS; round++) await Promise.all([a.runOnce(), b.runOnce()]);
    await Promise.all([a.stop(), b.stop()]);
    const ids = receiver.received.map((r) => r.headers['webhook-id']);
    expect(ids).toHaveLength(EVENTS);
    expect(new Set(ids).size).toBe(EVENTS);
    const deliveries = (await webhooks().listDeliveries(webhook.id, { limit: 200 })).deliveries;
    expect(deliveries.map((d) => [d.status, d.attempts])).toEqual(Array.from({ length: EVENTS }, () => ['delivered', 1]));
  });
});
