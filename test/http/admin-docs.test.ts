/**
 * The admin API's documentation is true: its OpenAPI document (served without a key, valid
 * OpenAPI 3.1, every route with exactly its statuses and the key's security, every example valid
 * against its schema, and docs/admin-openapi.json not drifting from it), its reference page, and
 * every `curl` example of docs/admin-api.md, run by a real shell against the admin listener
 * (a real socket) with the state it needs, getting the status the page shows.
 *
 * `npm run openapi` rewrites docs/admin-openapi.json with src/openapi-files.ts, the module the
 * copy is compared with here.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminKey } from '../../src/modules/admin/admin-keys.service.js';
import { ADMIN_OPENAPI_FILE, generateOpenApiFiles, openApiFileText } from '../../src/openapi-files.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, PASSWORD, signIn, withBearer } from '../helpers/flows.js';
import { codeNow, nextStep } from '../helpers/mfa.js';
import { documentExamples, HTTP_METHODS, type Json } from '../helpers/openapi.js';

const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const PAGE = path.join(ROOT, 'docs', 'admin-api.md');
/** The admin base URL the examples of docs/admin-api.md are written for. */
const DOCUMENTED_BASE = 'http://127.0.0.1:3001';

const run = promisify(execFile);

let ctx: TestContext;
let document: Json;
let base: string;

beforeAll(async () => {
  ctx = await createTestContext({ ADMIN_PORT: '0' }, { startOutboxWorker: false });
  const res = await ctx.app.admin!.inject({ method: 'GET', url: '/admin/v0/openapi.json' });
  expect(res.statusCode, res.body).toBe(200);
  document = res.json() as Json;
  await ctx.app.admin!.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(ctx.app.admin!.server.address() as AddressInfo).port}`;
});
afterAll(async () => ctx?.close());

/** Statuses every admin operation with a key may answer besides its own, and every operation's 500 and 503. */
const KEYED = ['401', '403', '429', '500', '503'];

/** Each operation of docs/admin-api.md with exactly its statuses (413 where a body is read). */
const EXPECTED: Record<string, string[]> = {
  'get /admin/v0/users': ['200', '400', ...KEYED],
  'post /admin/v0/users': ['201', '400', '409', '413', ...KEYED],
  'get /admin/v0/users/{user_id}': ['200', '400', '404', ...KEYED],
  'patch /admin/v0/users/{user_id}': ['200', '400', '404', '409', '413', ...KEYED],
  'delete /admin/v0/users/{user_id}': ['204', '400', '404', '413', ...KEYED],
  'post /admin/v0/users/{user_id}/ban': ['200', '400', '404', '413', ...KEYED],
  'post /admin/v0/users/{user_id}/unban': ['200', '400', '404', '413', ...KEYED],
  'post /admin/v0/users/{user_id}/password-reset': ['204', '400', '404', '409', '413', ...KEYED],
  'post /admin/v0/users/{user_id}/mfa/reset': ['204', '400', '404', '413', ...KEYED],
  'get /admin/v0/users/{user_id}/sessions': ['200', '400', '404', ...KEYED],
  'delete /admin/v0/users/{user_id}/sessions': ['204', '400', '404', '413', ...KEYED],
  'delete /admin/v0/users/{user_id}/sessions/{session_id}': ['204', '400', '404', '413', ...KEYED],
  'get /admin/v0/webhooks': ['200', ...KEYED],
  'post /admin/v0/webhooks': ['201', '400', '413', ...KEYED],
  'patch /admin/v0/webhooks/{webhook_id}': ['200', '400', '404', '413', ...KEYED],
  'delete /admin/v0/webhooks/{webhook_id}': ['204', '400', '404', '413', ...KEYED],
  'post /admin/v0/webhooks/{webhook_id}/rotate-secret': ['200', '400', '404', '413', ...KEYED],
  'get /admin/v0/webhooks/{webhook_id}/deliveries': ['200', '400', '404', ...KEYED],
  'post /admin/v0/webhooks/{webhook_id}/deliveries/{delivery_id}/retry': ['202', '400', '404', '413', ...KEYED],
  'get /admin/v0/audit': ['200', '400', ...KEYED],
  'get /admin/v0/openapi.json': ['200', '500', '503'],
};

function operations(): Map<string, Json> {
  const out = new Map<string, Json>();
  for (const [url, item] of Object.entries(document.paths as Json)) {
    for (const [method, operation] of Object.entries(item as Json)) if (HTTP_METHODS.includes(method)) out.set(`${method} ${url}`, operation as Json);
  }
  return out;
}

describe('GET /admin/v0/openapi.json', () => {
  it('is served without a key, and is a valid OpenAPI 3.1 document', async () => {
    expect(document.info).toMatchObject({ title: 'Latchkey admin API', version: '0.1.0' });
    const result = await new Validator().validate(structuredClone(document));
    expect(result.errors, JSON.stringify(result.errors, null, 2)).toBeUndefined();
  });

  it('has every admin operation, no other, each with exactly its statuses and the API key as its security', () => {
    const ops = operations();
    expect([...ops.keys()].sort()).toEqual(Object.keys(EXPECTED).sort());
    for (const [name, operation] of ops) {
      expect(Object.keys(operation.responses as Json).sort(), name).toEqual([...EXPECTED[name]!].sort());
      expect(operation.security, name).toEqual(name.endsWith('openapi.json') ? undefined : [{ adminApiKey: [] }]);
      expect(operation.tags, name).toHaveLength(1);
    }
    expect(document.components.securitySchemes).toEqual({ adminApiKey: expect.objectContaining({ type: 'http', scheme: 'bearer' }) });
    expect(Object.keys(document.components.schemas as Json)).toEqual(expect.arrayContaining(['AdminUser', 'AdminSession', 'AuditEntry', 'Error']));
  });

  it('every example is valid against its own schema (production Ajv options)', () => {
    const { validate, allExamples } = documentExamples(document);
    const examples = allExamples();
    expect(examples.length).toBeGreaterThan(8);
    for (const example of examples) expect(validate(example.schema, example.value), example.where).toBeUndefined();
  });

  it('docs/admin-openapi.json is the served document, as `npm run openapi` writes it (run it after changing a route)', async () => {
    const generated = (await generateOpenApiFiles(ctx.db)).find((f) => f.path === ADMIN_OPENAPI_FILE)!;
    // What the script writes is what this service serves.
    expect(generated.text).toBe(openApiFileText(document));
    expect(readFileSync(path.join(ROOT, ADMIN_OPENAPI_FILE), 'utf8'), 'docs/admin-openapi.json is stale: run `npm run openapi`').toBe(generated.text);
  });

  it('has a reference page at /admin/v0/docs whose assets are all served by the admin listener', async () => {
    const page = await ctx.app.admin!.inject({ method: 'GET', url: '/admin/v0/docs' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.body).toContain('<title>Latchkey admin API reference</title>');
    const assets = [...page.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(assets.length).toBeGreaterThan(0);
    for (const asset of assets) {
      expect(asset).toMatch(/^\/admin\/v0\/docs\//);
      expect((await ctx.app.admin!.inject({ method: 'GET', url: asset })).statusCode, asset).toBe(200);
    }
  });
});

/** Empties every table but the migrations': each example starts from a new service's state. */
async function emptyDatabase(): Promise<void> {
  const { rows } = await ctx.db.query<{ tablename: string }>("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename <> 'schema_version'");
  await ctx.db.query(`TRUNCATE ${rows.map((r) => `"${r.tablename}"`).join(', ')}`);
}

/** The shell blocks of docs/admin-api.md that call the admin listener. */
function curlExamples(): { heading: string; script: string; statuses: number[] }[] {
  const text = readFileSync(PAGE, 'utf8');
  const out: { heading: string; script: string; statuses: number[] }[] = [];
  let heading = '';
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.startsWith('#')) heading = line.replace(/^#+\s*/, '');
    if (line !== '```sh') continue;
    const block: string[] = [];
    for (i++; lines[i] !== '```'; i++) block.push(lines[i]!);
    const script = block.join('\n');
    if (!script.includes(DOCUMENTED_BASE)) continue;
    out.push({ heading, script, statuses: [...script.matchAll(/^# HTTP\/1\.1 (\d{3})/gm)].map((m) => Number(m[1])) });
  }
  return out;
}

describe('the curl examples of docs/admin-api.md', () => {
  const examples = curlExamples();

  it('cover every operation of the admin API, each showing its status', () => {
    const covered = new Set(examples.map((e) => e.heading));
    for (const heading of ['List users', 'Get a user', 'Create a user', 'Update a user', 'Delete a user', 'Ban a user', 'Unban a user', 'Send a password reset', 'Reset the second factor', "List a user's sessions", 'End every session of a user', 'End one session', 'List webhooks', 'Add a webhook', 'Update a webhook', 'Remove a webhook', "Rotate a webhook's secret", 'List deliveries', 'Retry a delivery', 'List audit entries', 'OpenAPI document']) {
      expect(covered, heading).toContain(heading);
    }
    for (const e of examples) expect(e.statuses.length, e.heading).toBeGreaterThan(0);
  });

  it.each(examples.map((e) => [e.heading, e] as const))('%s: run by a shell against the admin listener, the documented status', async (_heading, example) => {
    await emptyDatabase();
    // The state the examples assume: a key with every scope, a webhook endpoint with deliveries, bob, and alice, verified, signed in twice, with TOTP on.
    const { key } = await createAdminKey(ctx.db, { name: 'docs', scopes: ['users:read', 'users:write', 'sessions:write', 'webhooks', 'audit:read'], expiresAt: null, now: ctx.clock.now() });
    // A webhook endpoint (its deliveries refused: a private address), with deliveries of the events below.
    const { webhook } = await ctx.app.webhooks.add({ url: 'http://127.0.0.1:9/latchkey', eventTypes: ['*'] });
    await createVerifiedUser(ctx, { username: 'bob', email: 'bob@example.com' });
    ctx.clock.advance(1);
    const alice = await createVerifiedUser(ctx, { username: 'alice', email: 'alice@example.com' });
    // Two audit entries about alice, for the audit listing.
    await ctx.app.admin!.inject({ method: 'POST', url: `/admin/v0/users/${alice.id}/ban`, headers: { authorization: `Bearer ${key}` } });
    await ctx.app.admin!.inject({ method: 'POST', url: `/admin/v0/users/${alice.id}/unban`, headers: { authorization: `Bearer ${key}` } });
    const session = await signIn(ctx, { username: 'alice', password: PASSWORD });
    const live = await signIn(ctx, { username: 'alice', password: PASSWORD });
    const setup = await withBearer(ctx, 'POST', '/auth/v0/mfa/totp/setup', session.accessToken, { password: PASSWORD });
    const enable = await withBearer(ctx, 'POST', '/auth/v0/mfa/totp/enable', session.accessToken, { code: codeNow(ctx, (setup.json() as { secret: string }).secret) });
    expect(enable.statusCode, enable.body).toBe(200);
    nextStep(ctx);
    await ctx.app.webhookDelivery.runOnce();
    const [delivery] = (await ctx.app.webhooks.listDeliveries(webhook.id, {})).deliveries;
    expect(delivery).toBeDefined();

    const script = example.script.replaceAll(DOCUMENTED_BASE, base);
    const { stdout } = await run('bash', ['-euo', 'pipefail', '-c', script], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ADMIN_KEY: key, USER_ID: alice.id, SESSION_ID: live.sessionId, WEBHOOK_ID: webhook.id, DELIVERY_ID: delivery!.id },
      timeout: 10_000,
    });
    const statuses = [...stdout.matchAll(/^HTTP\/1\.1 (\d{3})/gm)].map((m) => Number(m[1]));
    expect(statuses, stdout).toEqual(example.statuses);
  });
});
