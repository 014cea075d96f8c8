/**
 * Prometheus metrics: `GET /metrics` in the text format, per-app registries,
 * request counts and latency per route pattern and status, sign-in and refresh outcomes,
 * sessions revoked by cause, emails sent and failed, the outbox backlog read at scrape time,
 * the process defaults, and METRICS_PORT (a listener of its own).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { listenMetrics } from '../../src/plugins/metrics.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, postJson, refresh, signIn, signUp, uniqueName, withBearer } from '../helpers/flows.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => ctx.close());

/** Upper bound of polling rounds while the background outbox worker finishes a send. */
const MAX_POLLS = 200;
const POLL_MS = 10;

async function scrape(context: TestContext = ctx): Promise<string> {
  const res = await context.app.inject({ method: 'GET', url: '/metrics' });
  expect(res.statusCode).toBe(200);
  return res.body;
}

/** The value of the sample `name` whose labels are exactly `labels`, or undefined. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (m === null || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1], x[2]]));
    const wanted = Object.entries(labels);
    if (wanted.length === Object.keys(got).length && wanted.every(([k, v]) => got[k] === v)) return Number(m[3]);
  }
  return undefined;
}

/** `sample`, 0 when absent (counters with labels appear at their first increment). */
const count = (text: string, name: string, labels: Record<string, string> = {}): number => sample(text, name, labels) ?? 0;

/** Runs the outbox and scrapes until `done` holds for the scrape (the background worker may be mid-send). */
async function scrapeUntil(done: (text: string) => boolean): Promise<string> {
  for (let i = 0; i < MAX_POLLS; i++) {
    await ctx.app.outbox.runOnce();
    const text = await scrape();
    if (done(text)) return text;
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
  throw new Error('condition not reached');
}

describe('GET /metrics', () => {
  it('answers the Prometheus text format with the process defaults, outside the API prefix', async () => {
    const res = await ctx.app.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4; charset=utf-8$/);
    expect(res.headers['cache-control']).toBe('no-store');
    for (const name of ['process_cpu_user_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_seconds', 'nodejs_heap_size_used_bytes']) {
      expect(res.body, name).toContain(`# TYPE ${name} `);
    }
    expect((await ctx.app.inject({ method: 'GET', url: '/auth/v0/metrics' })).statusCode).toBe(404);
  });

  it('counts requests and latency per route pattern and status, never per raw URL', async () => {
    const user = await createVerifiedUser(ctx);
    const a = await signIn(ctx, { username: user.username, password: user.password });
    const b = await signIn(ctx, { username: user.username, password: user.password });
    expect((await withBearer(ctx, 'DELETE', `/auth/v0/sessions/${b.sessionId}`, a.accessToken)).statusCode).toBe(204);
    const probe = `no-such-route-${uniqueName()}`;
    expect((await ctx.app.inject({ method: 'GET', url: `/auth/v0/${probe}?x=1` })).statusCode).toBe(404);

    const text = await scrape();
    const revokeOne = { method: 'DELETE', route: '/auth/v0/sessions/:session_id', status_code: '204' };
    expect(count(text, 'auth_http_requests_total', revokeOne)).toBeGreaterThanOrEqual(1);
    expect(count(text, 'auth_http_request_duration_seconds_count', revokeOne)).toBeGreaterThanOrEqual(1);
    expect(count(text, 'auth_http_request_duration_seconds_bucket', { ...revokeOne, le: '+Inf' })).toBeGreaterThanOrEqual(1);
    expect(count(text, 'auth_http_requests_total', { method: 'POST', route: '/auth/v0/sign-in', status_code: '200' })).toBeGreaterThanOrEqual(2);
    expect(count(text, 'auth_http_requests_total', { method: 'GET', route: 'unmatched', status_code: '404' })).toBeGreaterThanOrEqual(1);
    expect(text).not.toContain(b.sessionId);
    expect(text).not.toContain(probe);
    // The scrape itself is counted once it has been answered.
    expect(count(await scrape(), 'auth_http_requests_total', { method: 'GET', route: '/metrics', status_code: '200' })).toBeGreaterThanOrEqual(1);
  });

  it('counts sign-in outcomes: success, bad_credentials, unverified', async () => {
    const before = await scrape();
    const user = await createVerifiedUser(ctx);
    await signIn(ctx, { username: user.username, password: user.password });
    expect((await postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: 'wrong password here' })).statusCode).toBe(401);
    expect((await postJson(ctx, '/auth/v0/sign-in', { username: uniqueName(), password: 'unknown user here' })).statusCode).toBe(401);
    const unverified = await signUp(ctx);
    expect((await postJson(ctx, '/auth/v0/sign-in', { username: unverified.request.username, password: unverified.request.password })).statusCode).toBe(403);

    const after = await scrape();
    const delta = (outcome: string) => count(after, 'auth_sign_in_total', { outcome }) - count(before, 'auth_sign_in_total', { outcome });
    expect(delta('success')).toBe(1);
    expect(delta('bad_credentials')).toBe(2);
    expect(delta('unverified')).toBe(1);
    expect(delta('locked')).toBe(0);
  });

  it('counts refresh outcomes (rotated, reused, invalid, missing) and sessions revoked by cause', async () => {
    const before = await scrape();
    const user = await createVerifiedUser(ctx);
    const s1 = await signIn(ctx, { username: user.username, password: user.password });
    expect((await refresh(ctx, s1.refreshToken)).statusCode).toBe(200);
    expect((await refresh(ctx, s1.refreshToken)).statusCode).toBe(401); // reuse: revokes s1
    expect((await refresh(ctx, 'A'.repeat(43))).statusCode).toBe(401); // well-formed, unknown
    expect((await refresh(ctx, 'not-a-token')).statusCode).toBe(401);
    expect((await refresh(ctx, undefined)).statusCode).toBe(401);

    const s2 = await signIn(ctx, { username: user.username, password: user.password });
    expect((await withBearer(ctx, 'POST', '/auth/v0/logout', s2.accessToken)).statusCode).toBe(204);
    expect((await withBearer(ctx, 'POST', '/auth/v0/logout', s2.accessToken)).statusCode).toBe(401);
    const s3 = await signIn(ctx, { username: user.username, password: user.password });
    const s4 = await signIn(ctx, { username: user.username, password: user.password });
    expect((await withBearer(ctx, 'DELETE', `/auth/v0/sessions/${s4.sessionId}`, s3.accessToken)).statusCode).toBe(204);
    expect((await withBearer(ctx, 'DELETE', `/auth/v0/sessions/${s4.sessionId}`, s3.accessToken)).statusCode).toBe(204); // already revoked: not counted again
    await signIn(ctx, { username: user.username, password: user.password });
    expect((await withBearer(ctx, 'DELETE', '/auth/v0/sessions', s3.accessToken)).statusCode).toBe(204); // s3 and s5
    const s6 = await signIn(ctx, { username: user.username, password: user.password });
    await signIn(ctx, { username: user.username, password: user.password });
    const newPassword = `${user.password} renewed`;
    expect((await withBearer(ctx, 'POST', '/auth/v0/change-password', s6.accessToken, { current_password: user.password, new_password: newPassword })).statusCode).toBe(204); // s6 and s7

    const after = await scrape();
    const refreshDelta = (outcome: string) => count(after, 'auth_refresh_total', { outcome }) - count(before, 'auth_refresh_total', { outcome });
    expect(refreshDelta('rotated')).toBe(1);
    expect(refreshDelta('reused')).toBe(1);
    expect(refreshDelta('invalid')).toBe(2);
    expect(refreshDelta('missing')).toBe(1);
    expect(refreshDelta('grace_replay')).toBe(0);
    const revokedDelta = (cause: string) => count(after, 'auth_sessions_revoked_total', { cause }) - count(before, 'auth_sessions_revoked_total', { cause });
    expect(revokedDelta('refresh_token_reuse')).toBe(1);
    expect(revokedDelta('logout')).toBe(1);
    expect(revokedDelta('revoked_by_user')).toBe(1);
    expect(revokedDelta('revoke_all')).toBe(2);
    expect(revokedDelta('password_changed')).toBe(2);
  });

  it('reads the cache of verified access tokens at scrape time: a token presented again is cached, its session still checked', async () => {
    const before = await scrape();
    const user = await createVerifiedUser(ctx);
    const session = await signIn(ctx, { username: user.username, password: user.password });
    for (let i = 0; i < 3; i++) expect((await withBearer(ctx, 'GET', '/auth/v0/me', session.accessToken)).statusCode).toBe(200);
    expect((await withBearer(ctx, 'POST', '/auth/v0/logout', session.accessToken)).statusCode).toBe(204);
    // Answered from the cache, and refused all the same: the session check is never cached.
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', session.accessToken)).statusCode).toBe(401);
    const forged = `${session.accessToken.slice(0, -2)}${session.accessToken.at(-2) === 'A' ? 'B' : 'A'}${session.accessToken.at(-1)}`;
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', forged)).statusCode).toBe(401);
    const after = await scrape();
    const delta = (result: string) => count(after, 'auth_access_token_verifications_total', { result }) - count(before, 'auth_access_token_verifications_total', { result });
    expect(delta('verified')).toBe(2);
    expect(delta('cached')).toBe(4);
    expect(sample(after, 'auth_access_token_cache_entries')).toBe((sample(before, 'auth_access_token_cache_entries') ?? 0) + 1);
  });

  it('counts emails sent and failed, and reads the outbox backlog and the oldest pending age at scrape time', async () => {
    // The notice of the password change above is sent first, so that it is not counted here.
    await scrapeUntil((t) => sample(t, 'auth_outbox_emails', { status: 'pending' }) === 0);
    const before = await scrape();
    await createVerifiedUser(ctx);
    let text = await scrapeUntil((t) => count(t, 'auth_emails_sent_total') > count(before, 'auth_emails_sent_total'));
    expect(count(text, 'auth_emails_sent_total') - count(before, 'auth_emails_sent_total')).toBe(1);
    expect(sample(text, 'auth_outbox_emails', { status: 'pending' })).toBe(0);
    expect(sample(text, 'auth_outbox_oldest_pending_age_seconds')).toBe(0);

    // A transient SMTP failure (451): the row stays pending with a retry time on the test clock.
    ctx.smtp.reply = () => 451;
    try {
      await signUp(ctx);
      text = await scrapeUntil((t) => count(t, 'auth_emails_failed_total', { outcome: 'retry' }) > count(before, 'auth_emails_failed_total', { outcome: 'retry' }));
      expect(sample(text, 'auth_outbox_emails', { status: 'pending' })).toBe(1);
      ctx.clock.advance(120);
      text = await scrape();
      expect(sample(text, 'auth_outbox_oldest_pending_age_seconds')).toBeGreaterThanOrEqual(120);

      // A permanent failure (550) on the next attempt: the row is dead.
      ctx.smtp.reply = () => 550;
      text = await scrapeUntil((t) => count(t, 'auth_emails_failed_total', { outcome: 'dead' }) > count(before, 'auth_emails_failed_total', { outcome: 'dead' }));
      expect(count(text, 'auth_emails_failed_total', { outcome: 'dead' }) - count(before, 'auth_emails_failed_total', { outcome: 'dead' })).toBe(1);
      expect(sample(text, 'auth_outbox_emails', { status: 'pending' })).toBe(0);
      expect(sample(text, 'auth_outbox_emails', { status: 'dead' })).toBe(1);
      expect(sample(text, 'auth_outbox_oldest_pending_age_seconds')).toBe(0);
    } finally {
      ctx.smtp.reply = () => undefined;
    }
  });
});

describe('METRICS_PORT and per-app registries', () => {
  let other: TestContext;
  beforeAll(async () => {
    other = await createTestContext({ METRICS_PORT: '9464', RATE_LIMIT_SIGN_IN_PER_IDENTIFIER: '1' });
  });
  afterAll(async () => other?.close());

  it('serves /metrics only on its own listener, which closes with the app; counts locked sign-ins in this app only', async () => {
    expect((await other.app.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(404);
    const server = await listenMetrics(other.app, { host: '127.0.0.1', port: 0 });
    const address = server.server.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;

    const username = uniqueName();
    expect((await postJson(other, '/auth/v0/sign-in', { username, password: 'wrong password one' })).statusCode).toBe(401);
    expect((await postJson(other, '/auth/v0/sign-in', { username, password: 'wrong password two' })).statusCode).toBe(429);

    const res = await fetch(`http://127.0.0.1:${port}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const text = await res.text();
    expect(sample(text, 'auth_sign_in_total', { outcome: 'locked' })).toBe(1);
    expect(sample(text, 'auth_sign_in_total', { outcome: 'bad_credentials' })).toBe(1);
    expect(sample(text, 'auth_sign_in_total', { outcome: 'success' })).toBe(0);
    // The first app's registry is untouched by this one's and vice versa.
    expect(count(await scrape(), 'auth_sign_in_total', { outcome: 'locked' })).toBe(0);

    const elsewhere = await fetch(`http://127.0.0.1:${port}/auth/v0/me`);
    expect(elsewhere.status).toBe(404);
    expect(await elsewhere.json()).toEqual({ code: 'request.not_found', message: 'No such route.' });

    await other.close();
    await expect(fetch(`http://127.0.0.1:${port}/metrics`)).rejects.toThrow();
    other = undefined as unknown as TestContext;
  });

  it('METRICS_PORT must be a port other than PORT', () => {
    expect(() => loadConfig({ PORT: '3000', METRICS_PORT: '3000' })).toThrow(ConfigError);
    expect(() => loadConfig({ METRICS_PORT: '3000' })).toThrow(/METRICS_PORT: must differ from PORT/);
    expect(() => loadConfig({ METRICS_PORT: 'x' })).toThrow(/METRICS_PORT/);
    expect(loadConfig({ METRICS_PORT: '9464' }).metricsPort).toBe(9464);
    expect(loadConfig({}).metricsPort).toBeUndefined();
  });
});
