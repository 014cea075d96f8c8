import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DatabaseCommandIo } from '../../src/cli-support.js';
import { runWebhooksCommand } from '../../src/modules/webhooks/webhooks.cli.js';
import { verifyWebhook } from '../../packages/verify/src/webhook.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { signUp } from '../helpers/flows.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

/**
 * `latchkey webhooks ...` in-process on the test context's database, clock and DATA_DIR: the
 * secret the CLI prints verifies what the service delivers (both read the webhook key generated
 * into DATA_DIR), refusals exit 2 or 1 with a message, and each change is logged to stderr and
 * recorded in the admin audit log (key_name cli) without its secret.
 */

let ctx: TestContext;
let receiver: WebhookReceiver;
beforeAll(async () => {
  ctx = await createTestContext({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, { startWebhookWorker: false });
  receiver = await startWebhookReceiver();
});
afterAll(async () => {
  await ctx?.close();
  await receiver?.close();
});

async function run(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io: DatabaseCommandIo = {
    env: { DATA_DIR: ctx.config.dataDir, LOG_LEVEL: 'info' },
    stdout: (t) => (stdout += t),
    stderr: (t) => (stderr += t),
    openDatabase: async () => ({ ...ctx.db, close: async () => {} }),
    clock: ctx.clock,
  };
  const code = await runWebhooksCommand(argv, io);
  return { code, stdout, stderr };
}

const lastLine = (text: string): string => text.trimEnd().split('\n').at(-1)!;

describe('latchkey webhooks', () => {
  it('add prints the endpoint and its secret alone on the last line; the service signs with it', async () => {
    const added = await run('add', '--url', receiver.url('/cli'), '--events', 'user.created, user.deleted');
    expect(added.code, added.stderr).toBe(0);
    const secret = lastLine(added.stdout);
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const id = /^([0-9a-f-]{36}) /m.exec(added.stdout)![1]!;
    expect(added.stdout).toContain(`${receiver.url('/cli')}  user.created,user.deleted  true`);
    const trail = JSON.parse(lastLine(added.stderr)) as Record<string, unknown>;
    expect(trail).toMatchObject({ operatorAction: 'webhook.create', webhookId: id, details: { url: receiver.url('/cli'), event_types: ['user.created', 'user.deleted'] } });
    expect(added.stderr).not.toContain(secret.slice(6));

    await signUp(ctx);
    await ctx.app.webhookDelivery.runOnce();
    const [r] = receiver.to('/cli');
    expect(verifyWebhook({ secret, headers: r!.headers as Record<string, string>, body: r!.body, now: ctx.clock.now() }).event.type).toBe('user.created');

    const list = await run('list');
    expect(list.stdout).toMatch(new RegExp(`^id +url +event_types +enabled +created_at\\n${id} `));
    expect(list.stdout).not.toContain('whsec_');

    const deliveries = await run('deliveries', id, '--limit', '10');
    expect(deliveries.code).toBe(0);
    expect(deliveries.stdout).toMatch(/user\.created +delivered +1 /);
    const deliveryId = /^([0-9a-f-]{36}) +user\.created/m.exec(deliveries.stdout)![1]!;
    const retried = await run('retry', id, deliveryId);
    expect(retried.code, retried.stderr).toBe(0);
    expect((await run('deliveries', id, '--status', 'pending')).stdout).toContain(deliveryId);

    const rotated = await run('rotate-secret', id);
    expect(rotated.code).toBe(0);
    expect(lastLine(rotated.stdout)).toMatch(/^whsec_/);
    expect(lastLine(rotated.stdout)).not.toBe(secret);

    const disabled = await run('update', id, '--disable', '--events', '*');
    expect(disabled.stdout).toContain(`${receiver.url('/cli')}  *            false`);
    const removed = await run('remove', id);
    expect(removed.code).toBe(0);
    expect((await run('list')).stdout).toBe('No webhook endpoints.\n');
  });

  it('every change is recorded in the audit log as the operator\'s (key_name cli, no key, no user), never its secret; a refusal or a read records none', async () => {
    const audit = async (): Promise<{ action: string; key_id: string | null; key_name: string; user_id: string | null; ip: string | null; request_id: string | null; details: Record<string, unknown> }[]> =>
      (await ctx.db.query<{ action: string; key_id: string | null; key_name: string; user_id: string | null; ip: string | null; request_id: string | null; details: Record<string, unknown> }>(
        "SELECT action, key_id, key_name, user_id, ip, request_id, details FROM admin_audit_log WHERE action LIKE 'webhook.%' OR action = 'delivery.retry' ORDER BY at, id",
      )).rows;
    await ctx.db.query("DELETE FROM admin_audit_log WHERE action LIKE 'webhook.%' OR action = 'delivery.retry'");
    const added = await run('add', '--url', receiver.url('/audited'), '--events', 'user.created');
    const secret = lastLine(added.stdout);
    const id = /^([0-9a-f-]{36}) /m.exec(added.stdout)![1]!;
    await signUp(ctx);
    await ctx.app.webhookDelivery.runOnce();
    const deliveryId = /^([0-9a-f-]{36}) +user\.created/m.exec((await run('deliveries', id)).stdout)![1]!;
    ctx.clock.advance(1);
    expect((await run('retry', id, deliveryId)).code).toBe(0);
    ctx.clock.advance(1);
    const rotated = lastLine((await run('rotate-secret', id)).stdout);
    ctx.clock.advance(1);
    expect((await run('update', id, '--disable')).code).toBe(0);
    expect((await run('update', id, '--disable')).code).toBe(0); // no change: no entry
    expect((await run('remove', '00000000-0000-4000-8000-000000000000')).code).toBe(1);
    await run('list');
    ctx.clock.advance(1);
    expect((await run('remove', id)).code).toBe(0);
    const entries = await audit();
    expect(entries.map((e) => e.action)).toEqual(['webhook.create', 'delivery.retry', 'webhook.rotate_secret', 'webhook.update', 'webhook.delete']);
    for (const e of entries) expect(e).toMatchObject({ key_id: null, key_name: 'cli', user_id: null, ip: null, request_id: null, details: expect.objectContaining({ webhook_id: id }) });
    expect(entries[1]!.details).toEqual({ webhook_id: id, delivery_id: deliveryId });
    expect(entries[3]!.details).toEqual({ webhook_id: id, changed: ['enabled'], enabled: false });
    const text = JSON.stringify(entries);
    expect(text).not.toContain(secret.slice(6));
    expect(text).not.toContain(rotated.slice(6));
    expect(text).not.toContain('whsec_');
  });

  it('refusals: a value the rules refuse exits 2 with the reason and the usage; an unknown webhook exits 1', async () => {
    const bad = await run('add', '--url', 'http://example.com/hook', '--events', '*');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^url must use https:\/\/ \(http:\/\/ only for localhost, 127\.0\.0\.0\/8 or \[::1\]\)\n\nUsage: latchkey webhooks add/);
    expect((await run('add', '--url', receiver.url(), '--events', 'user.renamed')).stderr).toMatch(/^event_types: "user.renamed" is not an event type/);
    expect((await run('add', '--url', receiver.url())).code).toBe(2);
    expect((await run('update', '00000000-0000-4000-8000-000000000000')).stderr).toMatch(/^nothing to change/);
    const missing = await run('remove', '00000000-0000-4000-8000-000000000000');
    expect(missing).toMatchObject({ code: 1, stderr: 'The webhook does not exist.\n' });
    expect((await run('deliveries', '00000000-0000-4000-8000-000000000000', '--limit', '500')).code).toBe(2);
    expect((await run('frobnicate')).code).toBe(2);
    expect((await run('toString')).code).toBe(2);
    expect((await run('--help')).stdout).toContain('Usage: latchkey webhooks <command> [options]');
    expect((await run('retry', '--help')).stdout).toContain('Usage: latchkey webhooks retry ID DELIVERY_ID');
  });
});
