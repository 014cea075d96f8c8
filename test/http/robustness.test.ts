import fc from 'fast-check';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, keysOf, latestCode, postJson, refresh, refreshCookieOf, signIn, signUp, uniqueName, withBearer } from '../helpers/flows.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext();
});
afterAll(async () => ctx.close());

/** Runs per property: enough to find shallow crashes, few enough to keep the file fast. */
const RUNS = 150;
/** Sign-up hashes a password for every well-formed body: fewer runs. */
const SIGN_UP_RUNS = 100;
const PROPERTY_TIMEOUT = 120_000;
/** The base64url alphabet (RFC 4648 §5), in index order. */
const BASE64URL_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/**
 * `token` spelled another way, never the same text. A token of format 1 (32 bytes, 43 characters)
 * gets the 2 unused low bits of its last character set to `bits` (1 to 3): text that Node's
 * lenient decoder reads as the same bytes. A token of the current format (48 bytes, 64
 * characters) has no unused bits, so its last character moves `bits` places on: the same id with
 * another secret (docs/api.md#refresh-token-format).
 */
function respell(token: string, bits: number): string {
  const last = BASE64URL_ALPHABET.indexOf(token.at(-1)!);
  const next = token.length === 43 ? (last & ~3) | bits : (last + bits) % BASE64URL_ALPHABET.length;
  return token.slice(0, -1) + BASE64URL_ALPHABET[next]!;
}

// ---------------------------------------------------------------------------------------------
// Assertions

/** Asserts an Error body (docs/api.md#error-body): exactly `{code, message}` with string values, served as JSON. */
function expectErrorBody(res: LightMyRequestResponse, what = ''): { code: string; message: string } {
  expect(res.headers['content-type'], `${what} ${res.body}`).toMatch(/^application\/json/);
  const body = JSON.parse(res.body) as Record<string, unknown>;
  expect(keysOf(body), `${what} ${res.body}`).toEqual(['code', 'message']);
  expect(typeof body.code, what).toBe('string');
  expect(typeof body.message, what).toBe('string');
  expect(body.code as string, what).toMatch(/^[a-z_]+(\.[a-z_]+)*$/);
  return body as { code: string; message: string };
}

/** Asserts a given status and error code with an exact Error body. */
function expectError(res: LightMyRequestResponse, status: number, code: string): void {
  expect(res.statusCode, res.body).toBe(status);
  expect(expectErrorBody(res).code).toBe(code);
}

/** The property every answer must have: no 5xx, and every non-2xx is an exact Error body. */
function expectWellFormed(res: LightMyRequestResponse, what: string): void {
  expect(res.statusCode, `${what} -> ${res.statusCode} ${res.body}`).toBeLessThan(500);
  if (res.statusCode >= 200 && res.statusCode < 300) return;
  expect(res.statusCode, what).toBeGreaterThanOrEqual(400);
  expectErrorBody(res, what);
}

// ---------------------------------------------------------------------------------------------
// Arbitraries

/** Any UTF-16 code unit, lone surrogates and NUL included. */
const codeUnit = fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c));
/** Characters that trip up encoders, databases and normalisers. */
const trickyChar = fc.constantFrom('\u0000', '\ud800', '\udc00', '\uffff', '\ufeff', '\u0085', '\u2028', '\u202e', 'ﷺ', 'é', 'e\u0301', '😀', '\\', '"', "'", '%', ' ', 'a', '0');
const nastyString = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.string({ unit: codeUnit, maxLength: 40 }),
  fc.string({ unit: trickyChar, minLength: 1, maxLength: 40 }),
  fc.string({ unit: trickyChar, minLength: 1, maxLength: 40 }),
  fc.constantFrom('', ' ', '\u0000', 'a\u0000b', '\ud800', '\udfff', '😀'.repeat(80), 'x'.repeat(4000), '../../etc/passwd', "' OR 1=1 --", '%00', '\u202e', 'ﷺ'.repeat(8)),
);
const hugeNumber = fc.oneof(
  fc.double(),
  fc.bigInt().map((b) => Number(b)),
  fc.constantFrom(Number.MAX_VALUE, -Number.MAX_VALUE, Number.MAX_SAFE_INTEGER + 2, 2 ** 64, Number.MIN_VALUE, -0),
);
const nestedArrays = fc.letrec((tie) => ({
  node: fc.oneof({ depthSize: 'small', withCrossShrink: true }, fc.jsonValue({ maxDepth: 1 }), fc.array(tie('node'), { maxLength: 4 })),
})).node;

/** A wrong value for a member: mostly nasty strings, else wrong types. */
const badMember = fc.oneof(
  { weight: 4, arbitrary: nastyString },
  { weight: 1, arbitrary: hugeNumber },
  { weight: 1, arbitrary: fc.oneof(fc.boolean(), fc.constant(null)) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
  { weight: 1, arbitrary: nestedArrays },
);

const wellFormedUsername = fc.stringMatching(/^[a-zA-Z0-9_]{3,32}$/);
const wellFormedEmail = fc.emailAddress();
const wellFormedPhone = fc.stringMatching(/^[+]?[0-9 ()-]{8,24}$/);
const wellFormedPassword = fc.oneof(fc.string({ minLength: 8, maxLength: 72 }), fc.string({ unit: 'grapheme', minLength: 8, maxLength: 72 }), fc.string({ unit: codeUnit, minLength: 8, maxLength: 72 }));
const wellFormedCode = fc.stringMatching(/^[0-9]{6}$/);

/**
 * Objects shaped like a route's request: every member well-formed, then one or two members
 * replaced by a wrong value, maybe one removed, maybe extra members. So a single bad member
 * usually reaches the service past the schema's other checks.
 */
function shaped(members: Record<string, fc.Arbitrary<unknown>>): fc.Arbitrary<Record<string, unknown>> {
  const keys = Object.keys(members);
  return fc
    .tuple(
      fc.record(members),
      fc.array(fc.tuple(fc.constantFrom(...keys), badMember), { minLength: 0, maxLength: 2 }),
      fc.subarray(keys, { maxLength: 1 }),
      fc.oneof({ weight: 5, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.dictionary(nastyString, fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 }) }),
    )
    .map(([good, overrides, removed, extra]) => {
      const body: Record<string, unknown> = { ...(extra ?? {}), ...good };
      for (const [k, v] of overrides) body[k] = v;
      for (const k of removed) delete body[k];
      return body;
    });
}

/** Strings made of tricky characters only (NUL, lone surrogates, BOM, RTL override, ...). */
const trickyString = fc.string({ unit: trickyChar, minLength: 1, maxLength: 20 });

/** A well-formed request with exactly one member replaced by a tricky string. */
function oneTrickyMember(members: Record<string, fc.Arbitrary<unknown>>): fc.Arbitrary<Record<string, unknown>> {
  return fc.tuple(fc.record(members), fc.constantFrom(...Object.keys(members)), trickyString).map(([good, key, bad]) => ({ ...good, [key]: bad }));
}

const MEMBERS = {
  'sign-up': { username: wellFormedUsername, email: wellFormedEmail, phone: wellFormedPhone, password: wellFormedPassword },
  'sign-in': { username: wellFormedUsername, email: wellFormedEmail, phone: wellFormedPhone, password: wellFormedPassword },
  'verify-email': { email: wellFormedEmail, code: wellFormedCode },
  'verify-email/resend': { email: wellFormedEmail },
  'change-password': { current_password: wellFormedPassword, new_password: wellFormedPassword },
} as const satisfies Record<string, Record<string, fc.Arbitrary<unknown>>>;
type BodyRoute = keyof typeof MEMBERS;

/** Well-formed requests per route, the base of the fixed examples below. */
const BASES: Record<BodyRoute, Record<string, string>> = {
  'sign-up': { username: 'example_user', email: 'example@example.test', password: 'example password' },
  'sign-in': { username: 'example_user', password: 'example password' },
  'verify-email': { email: 'example@example.test', code: '123456' },
  'verify-email/resend': { email: 'example@example.test' },
  'change-password': { current_password: 'example password', new_password: 'example new password' },
};

/** Fixed examples run before the random ones: each member of the base replaced by a tricky string. */
function trickyExamples(route: BodyRoute): [Record<string, unknown>][] {
  const out: [Record<string, unknown>][] = [];
  for (const key of [...Object.keys(BASES[route]), 'username', 'email', 'phone']) {
    for (const bad of ['a\u0000b', '\u0000', 'x\ud800y', '\udc00', '\udc00\udc00', 'ﷺ\udc00\ud800', '\ufeffabc', 'ﷺ'.repeat(10), 'é'.repeat(72)]) {
      out.push([{ ...BASES[route], [key]: bad }]);
    }
  }
  return out;
}

const SHAPES: Record<BodyRoute, fc.Arbitrary<Record<string, unknown>>> = {
  'sign-up': shaped(MEMBERS['sign-up']),
  'sign-in': shaped(MEMBERS['sign-in']),
  'verify-email': shaped(MEMBERS['verify-email']),
  'verify-email/resend': shaped(MEMBERS['verify-email/resend']),
  'change-password': shaped(MEMBERS['change-password']),
};

/** Any JSON-ish value: JSON values, fast-check's anything, objects with arbitrary keys, nested arrays, huge numbers. */
function jsonBody(route: BodyRoute): fc.Arbitrary<unknown> {
  return fc.oneof(
    fc.jsonValue(),
    fc.anything(),
    fc.dictionary(nastyString, fc.jsonValue({ maxDepth: 2 })),
    nestedArrays,
    hugeNumber,
    nastyString,
    SHAPES[route],
    SHAPES[route],
    oneTrickyMember(MEMBERS[route]),
    oneTrickyMember(MEMBERS[route]),
  );
}

/** Raw request texts: arbitrary strings, broken JSON, huge numerals, deep nesting, prototype keys. */
const rawText = fc.oneof(
  nastyString,
  fc.json().map((j) => j.slice(0, Math.max(0, j.length - 1))),
  fc.json(),
  fc.tuple(fc.json(), nastyString).map(([j, s]) => j + s),
  fc.bigInt({ min: 10n ** 30n, max: 10n ** 400n }).map(String),
  fc.constantFrom(
    '',
    'null',
    'true',
    '"string"',
    '1e400',
    '-1e400',
    '{"password":',
    '{"__proto__":{"admin":true}}',
    '{"constructor":{"prototype":{"admin":true}}}',
    '{"username":"a","username":"b","password":"x"}',
    '\ufeff{}',
    '[' .repeat(7000) + ']'.repeat(7000),
    '{"a":'.repeat(2000) + '1' + '}'.repeat(2000),
  ),
);

/** Header values as they can appear on the wire: HTAB, visible ASCII, space and obs-text. */
const headerChar = fc.oneof(
  { weight: 10, arbitrary: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)) },
  { weight: 1, arbitrary: fc.constantFrom('\t') },
  { weight: 1, arbitrary: fc.integer({ min: 0x80, max: 0xff }).map((c) => String.fromCharCode(c)) },
);
const headerText = fc.string({ unit: headerChar, maxLength: 200 });

const contentType = fc.oneof(
  fc.constantFrom(
    'text/plain',
    'text/plain; charset=utf-8',
    'application/x-www-form-urlencoded',
    'multipart/form-data; boundary=xyz',
    'application/json; charset=utf-16',
    'application/json; charset=latin1',
    'APPLICATION/JSON',
    'application/json;;;',
    'application/jsonx',
    'application/vnd.api+json',
    'application/octet-stream',
    'application/xml',
    '*/*',
    ';',
    '',
    ' ',
  ),
  headerText,
  fc.tuple(fc.constantFrom('application/json', 'text/plain', 'application'), headerText).map(([a, b]) => a + b),
);

/** Percent-encodes every byte of `s` that is not unreserved (lone surrogates go out as U+FFFD). */
function percentEncode(s: string): string {
  return [...Buffer.from(s, 'utf8')].map((b) => (/[A-Za-z0-9\-._~]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`)).join('');
}

/** Query strings: raw visible ASCII (bad escapes included), and encoded key/value lists around email and code. */
const queryString = fc.oneof(
  fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).filter((c) => c !== 0x23).map((c) => String.fromCharCode(c)), maxLength: 120 }),
  fc
    .array(
      fc.tuple(
        fc.oneof(fc.constantFrom('email', 'code', 'email', 'code', '__proto__', 'constructor', 'email[]', 'code[0]', 'hasOwnProperty'), nastyString),
        fc.oneof(wellFormedEmail, wellFormedCode, nastyString, fc.constant('')),
        fc.boolean(),
      ),
      { maxLength: 5 },
    )
    .map((pairs) => pairs.map(([k, v, withValue]) => (withValue ? `${percentEncode(k)}=${percentEncode(v)}` : percentEncode(k))).join('&')),
  fc.tuple(wellFormedEmail, wellFormedCode).map(([e, c]) => `email=${percentEncode(e)}&code=${c}`),
);

// ---------------------------------------------------------------------------------------------

describe('unknown routes and methods', () => {
  it.each([
    ['GET', '/'],
    ['GET', '/nope'],
    ['GET', '/auth/v0'],
    ['GET', '/auth/v0/'],
    ['GET', '/auth/v1/me'],
    ['POST', '/auth/v0/sign-up/extra'],
    ['GET', '/auth/v0/.well-known/jwks'],
  ] as const)('%s %s: 404 request.not_found', async (method, url) => {
    expectError(await ctx.app.inject({ method, url }), 404, 'request.not_found');
  });

  it.each([
    ['PUT', '/auth/v0/me'],
    ['PATCH', '/auth/v0/sessions'],
    ['GET', '/auth/v0/sign-up'],
    ['DELETE', '/auth/v0/sign-in'],
    ['GET', '/auth/v0/logout'],
    ['PUT', '/auth/v0/sessions/abc'],
    ['POST', '/auth/v0/.well-known/jwks.json'],
    ['OPTIONS', '/auth/v0/sign-in'],
  ] as const)('%s %s (a known path): 404 request.not_found', async (method, url) => {
    const res = await ctx.app.inject({ method, url, headers: { 'content-type': 'application/json' }, payload: method === 'GET' || method === 'OPTIONS' ? undefined : '{}' });
    expectError(res, 404, 'request.not_found');
  });

  it('a malformed percent-escape in the path is 404 request.not_found, never 500', async () => {
    const user = await createVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    for (const url of ['/auth/v0/%zz', '/auth/v0/sessions/%E0%A4%A', '/auth/v0/sessions/%']) {
      const res = await ctx.app.inject({ method: 'DELETE', url, headers: { authorization: `Bearer ${s.accessToken}` } });
      expectError(res, 404, 'request.not_found');
    }
  });

  it('an undecodable path does not put its query string (a verification code) into the log', async () => {
    const res = await ctx.app.inject({ method: 'GET', url: '/auth/v0/verify-email%C0?email=leak%40example.test&code=914263' });
    expectError(res, 404, 'request.not_found');
    expect(ctx.rawLogs.join('\n')).not.toContain('914263');
    expect(ctx.rawLogs.join('\n')).not.toContain('leak');
  });
});

describe('body limit', () => {
  it('413 request.body_too_large for a body over 16 KiB to sign-up, JSON or not', async () => {
    const username = uniqueName();
    const big = JSON.stringify({ username, email: `${username}@example.test`, password: 'p'.repeat(17 * 1024) });
    expect(Buffer.byteLength(big)).toBeGreaterThan(16 * 1024);
    expectError(await ctx.app.inject({ method: 'POST', url: '/auth/v0/sign-up', headers: { 'content-type': 'application/json' }, payload: big }), 413, 'request.body_too_large');
    expectError(await ctx.app.inject({ method: 'POST', url: '/auth/v0/sign-up', headers: { 'content-type': 'text/plain' }, payload: big }), 413, 'request.body_too_large');
    const { rows } = await ctx.db.query('SELECT 1 FROM users WHERE username = $1', [username]);
    expect(rows).toHaveLength(0);
  });

  it('a body of just under 16 KiB is parsed (and then fails validation, not the limit)', async () => {
    const payload = JSON.stringify({ username: 'abc', email: 'abc@example.test', password: 'p'.repeat(16 * 1024 - 100) });
    expect(Buffer.byteLength(payload)).toBeLessThanOrEqual(16 * 1024);
    expectError(await ctx.app.inject({ method: 'POST', url: '/auth/v0/sign-up', headers: { 'content-type': 'application/json' }, payload }), 400, 'auth.sign_up.validation_failed');
  });

  it('413 also on routes that ignore their body', async () => {
    expectError(await ctx.app.inject({ method: 'POST', url: '/auth/v0/refresh', headers: { 'content-type': 'application/json' }, payload: 'x'.repeat(17 * 1024) }), 413, 'request.body_too_large');
  });
});

describe('stray bodies on routes without a body', () => {
  const stray: [string, Record<string, string>, string | undefined][] = [
    ['Content-Type: application/json and an empty body', { 'content-type': 'application/json' }, undefined],
    ['Content-Type: application/json and an empty string', { 'content-type': 'application/json' }, ''],
    ['a text/plain body', { 'content-type': 'text/plain' }, 'hello'],
    ['malformed JSON', { 'content-type': 'application/json' }, '{"oops":'],
    ['a JSON object', { 'content-type': 'application/json' }, '{"anything":1}'],
  ];

  it.each(stray)('refresh without a cookie and with %s: 401 auth.missing_refresh_token', async (_what, headers, payload) => {
    const res = await ctx.app.inject({ method: 'POST', url: '/auth/v0/refresh', headers, ...(payload === undefined ? {} : { payload }) });
    expectError(res, 401, 'auth.missing_refresh_token');
  });

  it.each(stray)('refresh with a valid cookie and with %s: 200, as if no body was sent', async (_what, headers, payload) => {
    const user = await createVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/auth/v0/refresh',
      headers: { ...headers, cookie: `refresh_token=${s.refreshToken}` },
      ...(payload === undefined ? {} : { payload }),
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().session_id).toBe(s.sessionId);
    expect(refreshCookieOf(res).value).not.toBe(s.refreshToken);
  });

  it.each(stray)('logout without a token and with %s: 401 auth.missing_access_token', async (_what, headers, payload) => {
    const res = await ctx.app.inject({ method: 'POST', url: '/auth/v0/logout', headers, ...(payload === undefined ? {} : { payload }) });
    expectError(res, 401, 'auth.missing_access_token');
  });

  it.each(stray)('logout with a valid token and with %s: 204, as if no body was sent', async (_what, headers, payload) => {
    const user = await createVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const res = await ctx.app.inject({
      method: 'POST',
      url: '/auth/v0/logout',
      headers: { ...headers, authorization: `Bearer ${s.accessToken}` },
      ...(payload === undefined ? {} : { payload }),
    });
    expect(res.statusCode, res.body).toBe(204);
    expectError(await withBearer(ctx, 'GET', '/auth/v0/me', s.accessToken), 401, 'auth.invalid_access_token');
  });
});

describe('sign-in with a username no user can have', () => {
  // SignInRequest puts no rule on `username` (docs/api.md#operations), so these are well-formed requests that
  // name nobody: 401 auth.invalid_credentials (a 400 validation failure would also be acceptable).
  it.each([
    ['a NUL character', (name: string) => `${name}\u0000`],
    ['only a NUL character', (_name: string) => '\u0000'],
    ['two lone low surrogates', (_name: string) => '\udc00\udc00'],
    ['a lone low surrogate after text', (name: string) => `${name}\udc00\udc00`],
    ['a reversed surrogate pair', (name: string) => `${name}\udc00\ud800`],
    ['a lone high surrogate', (name: string) => `${name}\ud800`],
  ])('%s: 401 (or 400), never 500, and nobody is signed in', async (_what, makeName) => {
    const user = await createVerifiedUser(ctx);
    const res = await postJson(ctx, '/auth/v0/sign-in', { username: makeName(user.username), password: user.password });
    expect(res.statusCode, res.body).not.toBe(500);
    expect([400, 401], res.body).toContain(res.statusCode);
    expect(expectErrorBody(res).code).toBe(res.statusCode === 401 ? 'auth.invalid_credentials' : 'auth.sign_in.validation_failed');
    expect(res.headers['set-cookie']).toBeUndefined();
  });
});

describe('property: request bodies never crash a route', () => {
  let bearer: string;
  beforeAll(async () => {
    const user = await createVerifiedUser(ctx);
    bearer = (await signIn(ctx, { username: user.username, password: user.password })).accessToken;
  });

  const routes: { route: BodyRoute; runs: number }[] = [
    { route: 'sign-up', runs: SIGN_UP_RUNS },
    { route: 'sign-in', runs: RUNS },
    { route: 'verify-email', runs: RUNS },
    { route: 'verify-email/resend', runs: RUNS },
    { route: 'change-password', runs: RUNS },
  ];

  const post = (route: BodyRoute, headers: Record<string, string>, payload: string | undefined): Promise<LightMyRequestResponse> => {
    const auth = route === 'change-password' ? { authorization: `Bearer ${bearer}` } : {};
    const options: InjectOptions = { method: 'POST', url: `/auth/v0/${route}`, headers: { ...headers, ...auth } };
    if (payload !== undefined) options.payload = payload;
    return ctx.app.inject(options);
  };

  for (const { route, runs } of routes) {
    it(
      `POST /auth/v0/${route}: arbitrary JSON values`,
      async () => {
        await fc.assert(
          fc.asyncProperty(jsonBody(route), async (value) => {
            const payload = JSON.stringify(value) as string | undefined;
            const res = await post(route, { 'content-type': 'application/json' }, payload);
            expectWellFormed(res, `POST ${route} ${payload?.slice(0, 300)}`);
          }),
          { numRuns: runs, examples: trickyExamples(route) },
        );
      },
      PROPERTY_TIMEOUT,
    );

    it(
      `POST /auth/v0/${route}: arbitrary raw text as application/json`,
      async () => {
        await fc.assert(
          fc.asyncProperty(rawText, async (text) => {
            const res = await post(route, { 'content-type': 'application/json' }, text);
            expectWellFormed(res, `POST ${route} ${JSON.stringify(text.slice(0, 300))}`);
          }),
          { numRuns: runs },
        );
      },
      PROPERTY_TIMEOUT,
    );

    it(
      `POST /auth/v0/${route}: arbitrary content types`,
      async () => {
        await fc.assert(
          fc.asyncProperty(contentType, fc.oneof(SHAPES[route].map((b) => JSON.stringify(b)), rawText), async (type, text) => {
            const res = await post(route, { 'content-type': type }, text);
            expectWellFormed(res, `POST ${route} content-type ${JSON.stringify(type)} ${JSON.stringify(text.slice(0, 200))}`);
            if (res.statusCode < 300) expect(type.toLowerCase()).toContain('json');
          }),
          { numRuns: runs },
        );
      },
      PROPERTY_TIMEOUT,
    );
  }

  it('the bearer used by the change-password properties is still valid (no body changed the password)', async () => {
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', bearer)).statusCode).toBe(200);
  });

  it(
    'GET /auth/v0/verify-email: arbitrary query strings',
    async () => {
      await fc.assert(
        fc.asyncProperty(queryString, async (query) => {
          const url = `/auth/v0/verify-email?${query}`;
          const res = await ctx.app.inject({ method: 'GET', url });
          expectWellFormed(res, `GET ${url.slice(0, 300)}`);
        }),
        { numRuns: RUNS },
      );
    },
    PROPERTY_TIMEOUT,
  );
});

describe('property: credentials headers never crash authentication', () => {
  let revokedAccess: string;
  let revokedRefresh: string[];
  /** With the refresh grace window on (REFRESH_REUSE_GRACE_SECONDS > 0): its own app and tokens. */
  let graceCtx: TestContext;
  let graceRevokedRefresh: string[];
  /** A live family of each app (a rotated parent and its live child), which no fuzzed cookie may change. */
  const live = new Map<TestContext, { parent: string; child: string; sessionId: string }>();
  /** Signs in, refreshes once; returns the access token and both refresh tokens (first the rotated parent). */
  const familyOf = async (c: TestContext) => {
    const user = await createVerifiedUser(c);
    const s = await signIn(c, { username: user.username, password: user.password });
    const rotated = await refresh(c, s.refreshToken);
    expect(rotated.statusCode).toBe(200);
    return { sessionId: s.sessionId, access: rotated.json().tokens.access_token as string, tokens: [s.refreshToken, refreshCookieOf(rotated).value] as [string, string] };
  };
  beforeAll(async () => {
    graceCtx = await createTestContext({ REFRESH_REUSE_GRACE_SECONDS: '300' });
    const revoked = await familyOf(ctx);
    revokedAccess = revoked.access;
    revokedRefresh = revoked.tokens;
    expect((await withBearer(ctx, 'POST', '/auth/v0/logout', revokedAccess)).statusCode).toBe(204);
    const graceRevoked = await familyOf(graceCtx);
    graceRevokedRefresh = graceRevoked.tokens;
    expect((await withBearer(graceCtx, 'POST', '/auth/v0/logout', graceRevoked.access)).statusCode).toBe(204);
    for (const c of [ctx, graceCtx]) {
      const f = await familyOf(c);
      live.set(c, { parent: f.tokens[0], child: f.tokens[1], sessionId: f.sessionId });
    }
  });
  afterAll(async () => graceCtx?.close());

  /** A token with characters flipped, inserted or removed. */
  const mutated = (token: () => string) =>
    fc.tuple(fc.nat(), fc.constantFrom('flip', 'insert', 'delete', 'truncate'), headerChar).map(([i, op, ch]) => {
      const t = token();
      const at = i % t.length;
      if (op === 'flip') return t.slice(0, at) + ch + t.slice(at + 1);
      if (op === 'insert') return t.slice(0, at) + ch + t.slice(at);
      if (op === 'delete') return t.slice(0, at) + t.slice(at + 1);
      return t.slice(0, at);
    });

  it(
    'GET /auth/v0/me with arbitrary Authorization headers: always 401 with an Error body',
    async () => {
      const b64url = fc.string({ unit: fc.constantFrom(...BASE64URL_ALPHABET), maxLength: 60 });
      const authorization = fc.oneof(
        headerText,
        headerText.map((t) => `Bearer ${t}`),
        fc.tuple(fc.constantFrom('Bearer', 'bearer', 'BEARER', 'Basic', 'Token', 'Bearer  ', ' Bearer'), headerText).map(([s, t]) => `${s} ${t}`),
        fc.tuple(b64url, b64url, b64url).map(([a, b, c]) => `Bearer ${a}.${b}.${c}`),
        fc.constantFrom('', ' ', 'Bearer', 'Bearer ', 'Bearer .', 'Bearer ..', 'Bearer a.b.c', 'Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.'),
        fc.constant(null).map(() => `Bearer ${revokedAccess}`),
        fc.constantFrom('bearer ', 'Bearer   ').map((p) => `${p}${revokedAccess}`),
        mutated(() => revokedAccess).map((t) => `Bearer ${t}`),
      );
      await fc.assert(
        fc.asyncProperty(authorization, async (value) => {
          const res = await ctx.app.inject({ method: 'GET', url: '/auth/v0/me', headers: { authorization: value } });
          const what = `authorization ${JSON.stringify(value.slice(0, 200))}`;
          expect(res.statusCode, `${what} ${res.body}`).toBe(401);
          expect(['auth.missing_access_token', 'auth.invalid_access_token']).toContain(expectErrorBody(res, what).code);
        }),
        { numRuns: RUNS },
      );
    },
    PROPERTY_TIMEOUT,
  );

  it.each([
    ['off', () => ctx, () => revokedRefresh],
    ['on (300 s)', () => graceCtx, () => graceRevokedRefresh],
  ] as const)(
    'POST /auth/v0/refresh with arbitrary Cookie headers, grace window %s: always 401 with an Error body, nothing changed',
    async (_grace, app, revoked) => {
      const c = app();
      const family = live.get(c)!;
      const b64url43 = fc.string({ unit: fc.constantFrom(...BASE64URL_ALPHABET), minLength: 43, maxLength: 43 });
      // The live token and its rotated parent with their last character changed (another secret
      // under the same id), and other spellings of 32 bytes (unused low bits of the last
      // character set): each is text the service never issued.
      const respelled = fc.constantFrom(family.child, family.parent, ...revoked(), 'A'.repeat(43)).chain((t) => fc.integer({ min: 1, max: 3 }).map((bits) => respell(t, bits)));
      const value = fc.oneof(headerText, b64url43, respelled, fc.constantFrom('', '""', '%', '%zz', '%00', '\u00ff'), fc.constantFrom(0, 1).map((i) => revoked()[i]!), mutated(() => revoked()[1]!));
      const cookie = fc.oneof(
        headerText,
        value.map((v) => `refresh_token=${v}`),
        fc.tuple(headerText, value).map(([other, v]) => `${other}; refresh_token=${v}`),
        fc.tuple(value, value).map(([a, b]) => `refresh_token=${a}; refresh_token=${b}`),
        fc.constantFrom('refresh_token', 'refresh_token=', '=;=;', ';;;', '__proto__=x', 'constructor=1; refresh_token=a', 'REFRESH_TOKEN=abc', ' refresh_token = x '),
      );
      await fc.assert(
        fc.asyncProperty(cookie, async (header) => {
          const res = await c.app.inject({ method: 'POST', url: '/auth/v0/refresh', headers: { cookie: header } });
          const what = `cookie ${JSON.stringify(header.slice(0, 200))}`;
          expect(res.statusCode, `${what} ${res.body}`).toBe(401);
          expect(['auth.missing_refresh_token', 'auth.invalid_refresh_token', 'auth.refresh_token_reused']).toContain(expectErrorBody(res, what).code);
          expect(res.headers['set-cookie'], what).toBeUndefined();
        }),
        { numRuns: RUNS },
      );
      // Nothing changed: the live family is not revoked and its live token still rotates.
      const { rows } = await c.db.query<{ revoked_at: Date | null }>('SELECT revoked_at FROM sessions WHERE id = $1', [family.sessionId]);
      expect(rows[0]!.revoked_at).toBeNull();
      const next = await refresh(c, family.child);
      expect(next.statusCode, next.body).toBe(200);
      live.set(c, { ...family, parent: family.child, child: refreshCookieOf(next).value });
    },
    PROPERTY_TIMEOUT,
  );
});

describe('log hygiene', () => {
  it('no password, token or verification code reaches the log over a full flow', async () => {
    const secrets: string[] = [];
    const password = `Hygiene passphrase ${uniqueName('pw')}`;
    const newPassword = `Second hygiene passphrase ${uniqueName('pw')}`;
    secrets.push(password, newPassword);

    // Sign-up, and GET verify-email (the code travels in the query string).
    const { res: up, body, request } = await signUp(ctx, { password });
    expect(up.statusCode).toBe(201);
    const email = body.user.email!;
    const code = await latestCode(ctx, email);
    const verified = await ctx.app.inject({ method: 'GET', url: `/auth/v0/verify-email?email=${encodeURIComponent(email)}&code=${code}` });
    expect(verified.statusCode).toBe(204);

    // A wrong password, and a malformed body that carries the password.
    expectError(await postJson(ctx, '/auth/v0/sign-in', { username: request.username, password: `${password}x` }), 401, 'auth.invalid_credentials');
    secrets.push(`${password}x`);
    const malformed = await ctx.app.inject({ method: 'POST', url: '/auth/v0/sign-in', headers: { 'content-type': 'application/json' }, payload: `{"username":"${request.username}","password":"${password}"` });
    expectError(malformed, 400, 'auth.sign_in.validation_failed');

    // Sign-in, refresh, me.
    const first = await signIn(ctx, { username: request.username, password });
    secrets.push(first.accessToken, first.refreshToken);
    const rotated = await refresh(ctx, first.refreshToken);
    expect(rotated.statusCode).toBe(200);
    const access2 = rotated.json().tokens.access_token as string;
    const refresh2 = refreshCookieOf(rotated).value;
    secrets.push(access2, refresh2);
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', access2)).statusCode).toBe(200);

    // Reuse of a rotated token on a second session (logged as a warning, with ids only).
    const second = await signIn(ctx, { username: request.username, password });
    secrets.push(second.accessToken, second.refreshToken);
    const secondRotated = await refresh(ctx, second.refreshToken);
    secrets.push(secondRotated.json().tokens.access_token as string, refreshCookieOf(secondRotated).value);
    expectError(await refresh(ctx, second.refreshToken), 401, 'auth.refresh_token_reused');

    // Change password (wrong one first), sign in with the new one, log out, refresh after logout.
    const wrongCurrent = `wrong current ${uniqueName('pw')}`;
    secrets.push(wrongCurrent);
    expectError(await withBearer(ctx, 'POST', '/auth/v0/change-password', access2, { current_password: wrongCurrent, new_password: newPassword }), 401, 'auth.invalid_current_password');
    expect((await withBearer(ctx, 'POST', '/auth/v0/change-password', access2, { current_password: password, new_password: newPassword })).statusCode).toBe(204);
    const third = await signIn(ctx, { username: request.username, password: newPassword });
    secrets.push(third.accessToken, third.refreshToken);
    expect((await withBearer(ctx, 'POST', '/auth/v0/logout', third.accessToken)).statusCode).toBe(204);
    expectError(await refresh(ctx, third.refreshToken), 401, 'auth.invalid_refresh_token');
    expectError(await withBearer(ctx, 'GET', '/auth/v0/me', third.accessToken), 401, 'auth.invalid_access_token');
    await ctx.app.outbox.runOnce();

    // The sink really captured this flow: the reuse warning names the user by id.
    const log = ctx.rawLogs.join('');
    expect(log).toContain('refresh_token.reused');
    expect(log).toContain(body.user.id);
    expect(log).toContain('/auth/v0/verify-email');

    for (const secret of secrets) {
      expect(log.includes(secret), `a secret of length ${secret.length} is in the log`).toBe(false);
      // JSON-escaped form too, and for tokens their signature part alone.
      expect(log.includes(JSON.stringify(secret).slice(1, -1))).toBe(false);
      const signature = secret.split('.')[2];
      if (signature !== undefined && signature.length > 20) expect(log.includes(signature)).toBe(false);
    }
    // SMTP is configured in tests, so the code is never logged (not even in the verify URL).
    expect(new RegExp(`(?<![0-9])${code}(?![0-9])`).test(log), 'the verification code is in the log').toBe(false);
    expect(log).not.toContain(`code=${code}`);
  });
});
