import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, keysOf, postJson, signIn, uniqueName, withBearer } from '../helpers/flows.js';

/**
 * The breached-password check (PASSWORD_BREACH_CHECK=hibp; NIST SP 800-63B-4 §3.1.1.2, OWASP
 * ASVS 5.0 V6.2.12) against a range server of the test's own on 127.0.0.1 that speaks the
 * k-anonymity range protocol with padding.
 */

/** Passes every local rule and is listed in the range answer with a count above 0. */
const BREACHED = 'Velvet Harbor Quietly 77';
/** Passes every local rule; its suffix is in the range answer only as a padding line (count 0). */
const PADDED_ONLY = 'Orchid Lantern Mosaic 19';
/** Passes every local rule; its suffix is not in the range answer at all. */
const CLEAN = 'Qz7#mK2$';
const BREACH_REASON = 'password has appeared in a data breach; choose another one.';

const sha1 = (password: string): string => createHash('sha1').update(password.normalize('NFKC'), 'utf8').digest('hex').toUpperCase();

/** Random padding lines of a range answer: 35 hex characters and count 0. */
function padding(n: number): string[] {
  return Array.from({ length: n }, () => `${randomBytes(18).toString('hex').slice(0, 35).toUpperCase()}:0`);
}

interface RangeRequest {
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
}

/** How the range server answers: a padded range, slowly (after 2.5 s), 500, or by closing the connection. */
type Mode = 'serve' | 'slow' | 'error' | 'close' | 'huge';

interface RangeServer {
  readonly url: string;
  readonly requests: RangeRequest[];
  mode: Mode;
  close(): Promise<void>;
}

/** Serves `GET /range/<prefix>` with `SUFFIX:COUNT` lines: the known entries of that prefix among padding. */
async function startRangeServer(): Promise<RangeServer> {
  const listed = new Map<string, string[]>();
  const list = (password: string, count: number): void => {
    const hash = sha1(password);
    listed.set(hash.slice(0, 5), [...(listed.get(hash.slice(0, 5)) ?? []), `${hash.slice(5)}:${count}`]);
  };
  list(BREACHED, 3730471);
  list(PADDED_ONLY, 0);
  const requests: RangeRequest[] = [];
  const state = { mode: 'serve' as Mode };
  const server: Server = createServer((req, res) => {
    requests.push({ url: req.url ?? '', headers: req.headers });
    const prefix = /^\/range\/([0-9A-F]{5})$/.exec(req.url ?? '')?.[1];
    if (state.mode === 'close') {
      req.socket.destroy();
      return;
    }
    if (state.mode === 'error') {
      res.writeHead(500, { 'content-type': 'text/plain' }).end('oops');
      return;
    }
    if (prefix === undefined) {
      res.writeHead(400).end();
      return;
    }
    const pad = state.mode === 'huge' ? 1200 : 400; // 'huge': over 64 KiB in all
    const lines = [...padding(pad), ...(listed.get(prefix) ?? []), ...padding(pad)];
    const answer = (): void => void res.writeHead(200, { 'content-type': 'text/plain' }).end(lines.join('\r\n'));
    if (state.mode === 'slow') setTimeout(answer, 2500).unref();
    else answer();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/range/`,
    requests,
    get mode() {
      return state.mode;
    },
    set mode(m: Mode) {
      state.mode = m;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

let range: RangeServer;
let ctx: TestContext;
beforeAll(async () => {
  range = await startRangeServer();
  ctx = await createTestContext({
    PASSWORD_BREACH_CHECK: 'hibp',
    PASSWORD_BREACH_API_URL: range.url,
    // One change-password attempt per user, so the test of the limit needs only two.
    RATE_LIMIT_SIGN_IN_PER_IDENTIFIER: '1',
    RATE_LIMIT_SIGN_UP_PER_IP: '30',
  });
});
afterAll(async () => {
  await ctx.close();
  await range.close();
});
beforeEach(() => {
  range.mode = 'serve';
});

function expectBreached(res: LightMyRequestResponse, code: string): void {
  expect(res.statusCode, res.body).toBe(400);
  expect(keysOf(res.json())).toEqual(['code', 'message']);
  expect(res.json()).toEqual({ code, message: BREACH_REASON });
}

function signUpWith(password: string, remoteAddress?: string): { username: string; send: () => Promise<LightMyRequestResponse> } {
  const username = uniqueName('bp');
  const body = { username, email: `${username}@example.test`, password };
  return {
    username,
    send: () =>
      remoteAddress === undefined
        ? postJson(ctx, '/auth/v0/sign-up', body)
        : ctx.app.inject({ method: 'POST', url: '/auth/v0/sign-up', payload: body, headers: { 'content-type': 'application/json' }, remoteAddress }),
  };
}

async function userCount(username: string): Promise<number> {
  const { rows } = await ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM users WHERE username = $1', [username]);
  return rows[0]!.n;
}

async function storedHash(userId: string): Promise<string> {
  const { rows } = await ctx.db.query<{ password_hash: string }>('SELECT password_hash FROM users WHERE id = $1', [userId]);
  return rows[0]!.password_hash;
}

/** Every piece of a password that must never appear in a log line: itself, its SHA-1 (both cases), prefix and suffix. */
function secretsOf(password: string): string[] {
  const hash = sha1(password);
  return [password, hash, hash.toLowerCase(), hash.slice(0, 5), hash.slice(5), hash.slice(5).toLowerCase()];
}

describe('breached-password check at sign-up (PASSWORD_BREACH_CHECK=hibp)', () => {
  it('sends only the 5-character SHA-1 prefix, with Add-Padding: true', async () => {
    const before = range.requests.length;
    const res = await signUpWith(CLEAN).send();
    expect(res.statusCode, res.body).toBe(201);
    const sent = range.requests.slice(before);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.url).toBe(`/range/${sha1(CLEAN).slice(0, 5)}`);
    expect(sent[0]!.headers['add-padding']).toBe('true');
    for (const secret of [CLEAN, sha1(CLEAN).slice(5), sha1(CLEAN).slice(5).toLowerCase()]) {
      expect(JSON.stringify(sent[0]!.headers)).not.toContain(secret);
    }
  });

  it('400 auth.sign_up.validation_failed for a breached password, and nothing is stored', async () => {
    const attempt = signUpWith(BREACHED);
    const res = await attempt.send();
    expectBreached(res, 'auth.sign_up.validation_failed');
    expect(await userCount(attempt.username)).toBe(0);
    expect(ctx.rawLogs.join('\n')).not.toContain(sha1(BREACHED).slice(5));
  });

  it('201 for a password whose suffix is only a padding line (count 0)', async () => {
    const before = range.requests.length;
    const attempt = signUpWith(PADDED_ONLY);
    const res = await attempt.send();
    expect(res.statusCode, res.body).toBe(201);
    expect(range.requests.slice(before).map((r) => r.url)).toEqual([`/range/${sha1(PADDED_ONLY).slice(0, 5)}`]);
    expect(await userCount(attempt.username)).toBe(1);
  });

  it('a password the local policy refuses is refused without a request to the range API', async () => {
    const before = range.requests.length;
    const res = await signUpWith('password123').send();
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toMatch(/^password is too common/);
    expect(range.requests.length).toBe(before);
  });

  it('a rate-limited sign-up makes no request to the range API', async () => {
    // 30 cheap attempts (a phone that does not normalise) from another client use up its hour.
    for (let i = 0; i < 30; i++) {
      const res = await ctx.app.inject({
        method: 'POST',
        url: '/auth/v0/sign-up',
        payload: { username: uniqueName('bp'), phone: '+1 (234) 5', password: CLEAN },
        headers: { 'content-type': 'application/json' },
        remoteAddress: '198.51.100.9',
      });
      expect(res.statusCode).toBe(400);
    }
    const before = range.requests.length;
    const res = await signUpWith(BREACHED, '198.51.100.9').send();
    expect(res.statusCode).toBe(429);
    expect(range.requests.length).toBe(before);
  });
});

describe('breached-password check at change-password', () => {
  it('400 auth.change_password.validation_failed for a breached new password, and the password is unchanged', async () => {
    const user = await createVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const before = await storedHash(user.id);
    const res = await withBearer(ctx, 'POST', '/auth/v0/change-password', s.accessToken, { current_password: user.password, new_password: BREACHED });
    expectBreached(res, 'auth.change_password.validation_failed');
    expect(res.headers['set-cookie']).toBeUndefined();
    expect(await storedHash(user.id)).toBe(before);
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', s.accessToken)).statusCode).toBe(200);
  });

  it('204 for a clean new password and for one only in the padding', async () => {
    for (const password of [CLEAN, PADDED_ONLY]) {
      const user = await createVerifiedUser(ctx);
      const s = await signIn(ctx, { username: user.username, password: user.password });
      const res = await withBearer(ctx, 'POST', '/auth/v0/change-password', s.accessToken, { current_password: user.password, new_password: password });
      expect(res.statusCode, res.body).toBe(204);
      await signIn(ctx, { username: user.username, password });
    }
  });

  it('a rate-limited change makes no request to the range API', async () => {
    const user = await createVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const first = await withBearer(ctx, 'POST', '/auth/v0/change-password', s.accessToken, { current_password: user.password, new_password: BREACHED });
    expect(first.statusCode).toBe(400);
    const before = range.requests.length;
    const second = await withBearer(ctx, 'POST', '/auth/v0/change-password', s.accessToken, { current_password: user.password, new_password: BREACHED });
    expect(second.statusCode).toBe(429);
    expect(range.requests.length).toBe(before);
  });
});

describe('the check fails open: accepted, with exactly one warning that holds no password material', () => {
  it.each([
    ['answers after more than 2 s', 'slow' as const, 'timeout'],
    ['answers 500', 'error' as const, 'status'],
    ['closes the connection', 'close' as const, 'network'],
    ['answers more than 64 KiB (not read beyond it)', 'huge' as const, 'too_large'],
  ])('the range server %s', async (_what, mode, failure) => {
    range.mode = mode;
    const logsBefore = ctx.rawLogs.length;
    const requestsBefore = range.requests.length;
    const attempt = signUpWith(BREACHED);
    const res = await attempt.send();
    expect(res.statusCode, res.body).toBe(201);
    expect(await userCount(attempt.username)).toBe(1);
    expect(range.requests.length).toBe(requestsBefore + 1);
    const lines = ctx.rawLogs.slice(logsBefore);
    const warnings = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l['level'] === 40);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ failure, msg: expect.stringMatching(/^breached-password check unavailable/) });
    for (const secret of secretsOf(BREACHED)) expect(lines.join('\n')).not.toContain(secret);
  });
});

describe('PASSWORD_BREACH_CHECK=off (the default)', () => {
  let off: TestContext;
  beforeAll(async () => {
    off = await createTestContext({ PASSWORD_BREACH_API_URL: range.url });
  });
  afterAll(async () => off.close());

  it('makes no request: a breached password is accepted at sign-up and change-password', async () => {
    const before = range.requests.length;
    const username = uniqueName('bp');
    const res = await postJson(off, '/auth/v0/sign-up', { username, email: `${username}@example.test`, password: BREACHED });
    expect(res.statusCode, res.body).toBe(201);
    const user = await createVerifiedUser(off);
    const s = await signIn(off, { username: user.username, password: user.password });
    const changed = await withBearer(off, 'POST', '/auth/v0/change-password', s.accessToken, { current_password: user.password, new_password: BREACHED });
    expect(changed.statusCode, changed.body).toBe(204);
    expect(range.requests.length).toBe(before);
  });
});
