/**
 * Every example in the OpenAPI document (the API reference page shows them) is true:
 *
 * - each example (a schema's `examples`, a media type's or parameter's `example`/`examples`)
 *   is valid against its own schema, checked by Ajv with the options requests are validated
 *   with in production (src/app.ts AJV_OPTIONS);
 * - each request example (a JSON body, or the query built from the parameters' examples) is sent
 *   to the service (same buildApp as production), its database emptied, after a fixture per
 *   operation has set up
 *   what the example needs: a user with the example's username, email and password, a live
 *   verification code equal to the example's, a session and its Bearer token or refresh cookie.
 *   It must get the documented status (the first 2xx of the operation), and a JSON answer must
 *   match the documented schema of that status. Operations without a request (refresh, logout,
 *   the probes, ...) are called once the same way.
 *
 * A new operation without a fixture, or with a body or query but no example, fails here.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { hmacSha256 } from '../../src/crypto/secrets.js';
import { normalizeEmail } from '../../src/modules/users/identifiers.js';
import { registrationOptions, signInOptions, withPasskey } from '../helpers/passkeys.js';
import { SoftwareAuthenticator } from '../helpers/webauthn.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { documentExamples, examplesOf, HTTP_METHODS, type Json } from '../helpers/openapi.js';
import { createVerifiedUser, latestCode, PASSWORD, postJson, setCookies, signIn, uniqueName } from '../helpers/flows.js';
import { stepAt, totpForStep } from '../helpers/totp.js';
import { recoveryCodeHash } from '../../src/modules/mfa/totp.js';
import { startRogueProvider } from '../helpers/rogue-provider.js';
import { TestBrowser } from '../helpers/oauth-browser.js';

// The identity provider of the examples' flows (a local OpenID Provider), configured as `rogue`.
const PUBLIC_URL = 'http://localhost:3000';
const provider = await startRogueProvider(`${PUBLIC_URL}/auth/v0/oauth/rogue/callback`);
provider.accounts.set('alice', { sub: 'alice-at-provider', email: 'alice@provider.example', email_verified: true });

// The document is read once, before the tests are collected, so each example gets a test of its own.
const ctx = await createTestContext({
  PUBLIC_URL,
  OAUTH_PROVIDERS: 'rogue',
  OAUTH_ROGUE_ISSUER: provider.issuer,
  OAUTH_ROGUE_CLIENT_ID: provider.clientId,
  OAUTH_ROGUE_CLIENT_SECRET: provider.clientSecret,
  OAUTH_REDIRECT_URLS: 'https://app.example.com/',
});
const document = (await ctx.app.inject({ method: 'GET', url: '/auth/v0/openapi.json' })).json() as Json;
afterAll(async () => {
  await ctx.close();
  await provider.close();
});

/** Empties every table but the migrations' and forgets the emails received: each example starts from a new service's state. */
async function emptyDatabase(): Promise<void> {
  const { rows } = await ctx.db.query<{ tablename: string }>(
    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename <> 'schema_version'",
  );
  await ctx.db.query(`TRUNCATE ${rows.map((r) => `"${r.tablename}"`).join(', ')}`);
  ctx.smtp.messages.length = 0;
}

const { validate, allExamples } = documentExamples(document);

interface Operation {
  readonly method: string;
  readonly path: string;
  readonly operationId: string;
  readonly operation: Json;
}

function allOperations(): Operation[] {
  return Object.entries(document.paths as Json).flatMap(([path, item]) =>
    Object.entries(item as Json)
      .filter(([method]) => HTTP_METHODS.includes(method))
      .map(([method, operation]) => ({ method, path, operationId: (operation as Json).operationId as string, operation: operation as Json })),
  );
}

/** A request to send: a JSON body, or query parameters; none for operations that take neither. */
interface RequestExample {
  readonly name: string;
  readonly body?: Json;
  readonly query?: Record<string, string>;
  /** A form body (`application/x-www-form-urlencoded`, the `form_post` callback). */
  readonly form?: Record<string, string>;
}

/** The documented request examples of an operation: each body example, or one query made of each parameter's example. */
function requestExamples(operation: Json): RequestExample[] {
  const json = operation.requestBody?.content?.['application/json'] as Json | undefined;
  if (json !== undefined) return examplesOf(json).map(({ name, value }) => ({ name, body: value as Json }));
  const form = operation.requestBody?.content?.['application/x-www-form-urlencoded'] as Json | undefined;
  if (form !== undefined) return examplesOf(form).map(({ name, value }) => ({ name, form: value as Record<string, string> }));
  const query = ((operation.parameters ?? []) as Json[]).filter((p) => p.in === 'query');
  if (query.length > 0) {
    const values = query.map((p) => [p.name as string, examplesOf(p)[0]?.value] as const);
    const missing = values.filter(([, v]) => v === undefined).map(([n]) => n);
    if (missing.length > 0) throw new Error(`query parameters without an example: ${missing.join(', ')}`);
    return [{ name: 'query example', query: Object.fromEntries(values.map(([n, v]) => [n, String(v)])) }];
  }
  return [{ name: 'no request' }];
}

/** What a fixture sets up for the request: headers (Bearer, cookie) and path parameters. */
interface Prepared {
  readonly headers?: Record<string, string>;
  readonly params?: Record<string, string>;
  /**
   * The TOTP code to send in place of the example's `code`: a TOTP code is valid for 30 s of one
   * secret, so no fixed example can be a live one (the example itself is still checked against
   * its schema above). Used by the operations that take a TOTP code only.
   */
  readonly totpCode?: string;
  /**
   * The body to send in place of the example: a WebAuthn response signs a challenge that is used
   * once, so no fixed example can be a live one (the example is still checked against its schema).
   */
  readonly body?: Json;
  /** The query to send in place of the example's: a callback's `code` and `state` are those of a live flow, never a fixed example. */
  readonly query?: Record<string, string>;
}

type Fixture = (ctx: TestContext, example: RequestExample) => Promise<Prepared>;

const nothing: Fixture = async () => ({});

/** A verified user named by the example (its username, email and password where it gives them), signed in. */
async function signedIn(ctx: TestContext, example: RequestExample, password = PASSWORD) {
  const username = (example.body?.username as string | undefined) ?? uniqueName();
  const email = (example.body?.email as string | undefined) ?? `${username}@example.test`;
  const user = await createVerifiedUser(ctx, { username, email, password });
  return { user, session: await signIn(ctx, { username: user.username, password }) };
}

const bearer: Fixture = async (ctx, example) => {
  const { session } = await signedIn(ctx, example);
  return { headers: { authorization: `Bearer ${session.accessToken}` } };
};

/** A user who signed up with the example's email and has not verified it yet. */
async function unverified(ctx: TestContext, email: string): Promise<void> {
  const res = await postJson(ctx, '/auth/v0/sign-up', { username: uniqueName(), email, password: PASSWORD });
  expect(res.statusCode, res.body).toBe(201);
  await latestCode(ctx, normalizeEmail(email));
}

/** An unverified user whose live verification code is the example's (its HMAC replaces the emailed code's). */
const liveCode: Fixture = async (ctx, example) => {
  const { email, code } = (example.body ?? example.query) as { email: string; code: string };
  await unverified(ctx, email);
  const { rows } = await ctx.db.query<{ id: string }>(
    'SELECT id FROM verification_codes WHERE email = $1 AND consumed_at IS NULL AND superseded_at IS NULL',
    [normalizeEmail(email)],
  );
  expect(rows).toHaveLength(1);
  await ctx.db.query('UPDATE verification_codes SET code_hash = $2 WHERE id = $1', [rows[0]!.id, hmacSha256(ctx.app.keys.codeHmacKey, `${rows[0]!.id}:${code}`)]);
  return {};
};

/** A verified user with the example's email whose live password-reset code is the example's (its HMAC replaces the emailed code's). */
const liveResetCode: Fixture = async (ctx, example) => {
  const { email, code } = example.body as { email: string; code: string };
  await createVerifiedUser(ctx, { email });
  expect((await postJson(ctx, '/auth/v0/password-reset', { email })).statusCode).toBe(204);
  await ctx.app.outbox.runOnce();
  const { rows } = await ctx.db.query<{ id: string }>(
    "SELECT id FROM verification_codes WHERE purpose = 'password_reset' AND email = $1 AND consumed_at IS NULL AND superseded_at IS NULL",
    [normalizeEmail(email)],
  );
  expect(rows).toHaveLength(1);
  await ctx.db.query('UPDATE verification_codes SET code_hash = $2 WHERE id = $1', [rows[0]!.id, hmacSha256(ctx.app.keys.codeHmacKey, `${rows[0]!.id}:${code}`)]);
  return {};
};

/** A signed-in user whose TOTP is set up (not enabled) with a known secret: its Bearer header and the secret. */
async function totpSetUp(ctx: TestContext, example: RequestExample) {
  const { session } = await signedIn(ctx, example);
  const headers = { authorization: `Bearer ${session.accessToken}` };
  const res = await postJson(ctx, '/auth/v0/mfa/totp/setup', { password: PASSWORD }, headers);
  expect(res.statusCode, res.body).toBe(200);
  return { headers, secret: (res.json() as { secret: string }).secret };
}

/** A signed-in user with TOTP enabled, and a recovery code equal to the example's `code` or `recovery_code` where it gives one. */
async function totpEnabled(ctx: TestContext, example: RequestExample) {
  const { headers, secret } = await totpSetUp(ctx, example);
  const res = await postJson(ctx, '/auth/v0/mfa/totp/enable', { code: totpForStep(secret, stepAt(ctx.clock.now())) }, headers);
  expect(res.statusCode, res.body).toBe(200);
  // The next step, so the example's request is no replay of the enabling code.
  ctx.clock.advance(30);
  const typed = (example.body?.recovery_code ?? example.body?.code) as string | undefined;
  const userId = (await ctx.db.query<{ user_id: string }>('SELECT user_id FROM mfa_totp')).rows[0]!.user_id;
  const hash = typed === undefined ? undefined : recoveryCodeHash(ctx.app.keys.mfa.recoveryCodeKey, userId, typed);
  if (hash !== undefined) await ctx.db.query("UPDATE mfa_recovery_codes SET code_hash = $2 WHERE id = (SELECT id FROM mfa_recovery_codes WHERE user_id = $1 LIMIT 1)", [userId, hash]);
  return { headers, secret, liveCode: hash === undefined ? totpForStep(secret, stepAt(ctx.clock.now())) : undefined };
}

/** The Bearer header of a signed-in user whose password is then removed (a user who signed up through a provider). */
async function withoutPassword(ctx: TestContext, example: RequestExample) {
  const { user, session } = await signedIn(ctx, example);
  await ctx.db.query('UPDATE users SET password_hash = NULL WHERE id = $1', [user.id]);
  return { user, headers: { authorization: `Bearer ${session.accessToken}` } };
}

/** Per operationId: the state its example needs. */
const FIXTURES: Record<string, Fixture> = {
  signUp: nothing,
  verifyEmail: liveCode,
  verifyEmailWithBody: liveCode,
  resendVerification: async (ctx, example) => {
    await unverified(ctx, example.body!.email as string);
    return {};
  },
  requestPasswordReset: nothing,
  confirmPasswordReset: liveResetCode,
  signIn: async (ctx, example) => {
    await signedIn(ctx, example, example.body!.password as string);
    return {};
  },
  refresh: async (ctx, example) => {
    const { session } = await signedIn(ctx, example);
    return { headers: { cookie: `refresh_token=${session.refreshToken}` } };
  },
  logout: bearer,
  listSessions: bearer,
  revokeAllSessions: bearer,
  revokeSession: async (ctx, example) => {
    const { user, session } = await signedIn(ctx, example);
    const other = await signIn(ctx, { username: user.username, password: PASSWORD });
    return { headers: { authorization: `Bearer ${session.accessToken}` }, params: { session_id: other.sessionId } };
  },
  getMe: bearer,
  changePassword: async (ctx, example) => {
    const { session } = await signedIn(ctx, example, example.body!.current_password as string);
    return { headers: { authorization: `Bearer ${session.accessToken}` } };
  },
  changeEmail: async (ctx, example) => {
    const { session } = await signedIn(ctx, example, example.body!.password as string);
    return { headers: { authorization: `Bearer ${session.accessToken}` } };
  },
  confirmEmailChange: async (ctx, example) => {
    const { session } = await signedIn(ctx, example);
    const headers = { authorization: `Bearer ${session.accessToken}` };
    const response = await postJson(ctx, '/auth/v0/change-email', { new_email: 'alice@example.org', password: PASSWORD }, headers);
    expect(response.statusCode, response.body).toBe(204);
    const { rows } = await ctx.db.query<{ id: string }>(
      "SELECT id FROM verification_codes WHERE purpose = 'email_change' AND consumed_at IS NULL AND superseded_at IS NULL",
    );
    expect(rows).toHaveLength(1);
    const code = example.body!.code as string;
    await ctx.db.query('UPDATE verification_codes SET code_hash = $2 WHERE id = $1', [rows[0]!.id, hmacSha256(ctx.app.keys.codeHmacKey, `${rows[0]!.id}:${code}`)]);
    return { headers };
  },
  deleteAccount: async (ctx, example) => {
    const { session } = await signedIn(ctx, example, example.body!.password as string);
    return { headers: { authorization: `Bearer ${session.accessToken}` } };
  },
  setUpTotp: async (ctx, example) => {
    const { session } = await signedIn(ctx, example, example.body!.password as string);
    return { headers: { authorization: `Bearer ${session.accessToken}` } };
  },
  enableTotp: async (ctx, example) => {
    const { headers, secret } = await totpSetUp(ctx, example);
    return { headers, totpCode: totpForStep(secret, stepAt(ctx.clock.now())) };
  },
  disableTotp: async (ctx, example) => {
    const { headers, liveCode } = await totpEnabled(ctx, example);
    return { headers, ...(liveCode === undefined ? {} : { totpCode: liveCode }) };
  },
  regenerateRecoveryCodes: async (ctx, example) => {
    const { headers, liveCode } = await totpEnabled(ctx, example);
    return { headers, ...(liveCode === undefined ? {} : { totpCode: liveCode }) };
  },
  signInMfa: async (ctx, example) => {
    const { liveCode } = await totpEnabled(ctx, example);
    const user = (await ctx.db.query<{ username: string }>('SELECT username FROM users')).rows[0]!;
    const res = await postJson(ctx, '/auth/v0/sign-in', { username: user.username, password: PASSWORD });
    expect(res.statusCode, res.body).toBe(403);
    const challenge = setCookies(res).find((c) => c.name === 'mfa_challenge')!.value;
    return { headers: { cookie: `mfa_challenge=${challenge}` }, ...(liveCode === undefined ? {} : { totpCode: liveCode }) };
  },
  passkeySignInOptions: nothing,
  signInWithPasskey: async (ctx) => {
    const { authenticator } = await withPasskey(ctx);
    const { options, cookie } = await signInOptions(ctx);
    return { headers: { cookie: `webauthn_challenge=${cookie}` }, body: { response: authenticator.get(options) } };
  },
  passkeyRegistrationOptions: bearer,
  registerPasskey: async (ctx, example) => {
    const { session } = await signedIn(ctx, example);
    const options = await registrationOptions(ctx, session.accessToken);
    return { headers: { authorization: `Bearer ${session.accessToken}` }, body: { ...example.body, response: new SoftwareAuthenticator().create(options) } };
  },
  listPasskeys: bearer,
  renamePasskey: async (ctx) => {
    const { session, passkey } = await withPasskey(ctx);
    return { headers: { authorization: `Bearer ${session.accessToken}` }, params: { passkey_id: passkey.id } };
  },
  deletePasskey: async (ctx) => {
    const { session, passkey } = await withPasskey(ctx);
    return { headers: { authorization: `Bearer ${session.accessToken}` }, params: { passkey_id: passkey.id } };
  },
  listIdentityProviders: nothing,
  authorizeWithProvider: async () => ({ params: { provider: 'rogue' } }),
  providerCallback: async (ctx) => {
    // A flow run at the provider up to its return: the live callback query and the flow cookie.
    const browser = new TestBrowser(ctx, PUBLIC_URL);
    browser.setCookie(provider.issuer, 'rogue_user', 'alice');
    await browser.navigate(`${PUBLIC_URL}/auth/v0/oauth/rogue/authorize`, { stopBefore: (url) => url.pathname.endsWith('/callback') });
    const callback = new URL(browser.stoppedAt!);
    return { params: { provider: 'rogue' }, query: Object.fromEntries(callback.searchParams), headers: { cookie: `oauth_flow=${browser.cookie(PUBLIC_URL, 'oauth_flow')!}` } };
  },
  providerCallbackFormPost: async () => ({ params: { provider: 'rogue' } }),
  linkProvider: async (ctx, example) => ({ ...(await bearer(ctx, example)), params: { provider: 'rogue' } }),
  listIdentities: bearer,
  unlinkIdentity: async (ctx, example) => {
    const { user, session } = await signedIn(ctx, example);
    const id = '5d1c8e0a-7b2f-4a61-9c3e-2f4b6a8d0e17';
    await ctx.db.query("INSERT INTO user_identities (id, user_id, provider, issuer, subject, email, created_at) VALUES ($1, $2, 'rogue', $3, 'alice-at-provider', NULL, now())", [id, user.id, provider.issuer]);
    return { headers: { authorization: `Bearer ${session.accessToken}` }, params: { identity_id: id } };
  },
  setPassword: async (ctx, example) => ({ headers: (await withoutPassword(ctx, example)).headers }),
  getJwks: nothing,
  getLiveness: nothing,
  getReadiness: nothing,
  getMetrics: nothing,
  getOpenApiDocument: nothing,
};

/** The status an example is documented for: the operation's first 2xx, or its 3xx (a redirect) when it has none. */
function documentedStatus(operation: Json): number {
  const statuses = Object.keys(operation.responses as Json);
  const status = statuses.find((s) => /^2\d\d$/.test(s)) ?? statuses.find((s) => /^3\d\d$/.test(s));
  if (status === undefined) throw new Error(`${operation.operationId as string} documents no 2xx or 3xx`);
  return Number(status);
}

describe('every example of the OpenAPI document is valid against its own schema (production Ajv options)', () => {
  const examples = allExamples();

  it('has examples: every operation with a body or query has a request example, and every JSON success body a response example', () => {
    for (const { operationId, operation } of allOperations()) {
      const success = (operation.responses as Json)[String(documentedStatus(operation))] as Json;
      const json = success.content?.['application/json'] as Json | undefined;
      if (json !== undefined) expect(examplesOf(json).length, `${operationId} ${documentedStatus(operation)}`).toBeGreaterThan(0);
      const hasRequest = operation.requestBody !== undefined || ((operation.parameters ?? []) as Json[]).some((p) => p.in === 'query');
      if (hasRequest) expect(requestExamples(operation)[0]!.name, operationId).not.toBe('no request');
    }
    expect(examples.length).toBeGreaterThan(20);
  });

  it.each(examples.map((e) => [e.where, e] as const))('%s', (_where, example) => {
    expect(validate(example.schema, example.value)).toBeUndefined();
  });
});

describe('every request example, sent to the service with the state it needs, gets its documented status', () => {
  const cases = allOperations().flatMap((op) => requestExamples(op.operation).map((example) => [`${op.operationId} (${example.name})`, op, example] as const));

  it('has a fixture for every operation of the document, and no other', () => {
    expect(Object.keys(FIXTURES).sort()).toEqual(allOperations().map((o) => o.operationId).sort());
  });

  it.each(cases)('%s', async (_name, op, example) => {
    await emptyDatabase();
    const fixture = FIXTURES[op.operationId];
    expect(fixture, `no fixture for ${op.operationId}`).toBeDefined();
    const prepared = await fixture!(ctx, example);
    const path = op.path.replace(/\{([^}]+)\}/g, (_m, name: string) => encodeURIComponent(prepared.params?.[name] ?? `missing-${name}`));
    const sent = prepared.query ?? example.query;
    const query = sent === undefined ? '' : `?${new URLSearchParams(sent).toString()}`;
    const res = await ctx.app.inject({
      method: op.method.toUpperCase() as 'GET',
      url: `${path}${query}`,
      headers: {
        ...(example.body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(example.form === undefined ? {} : { 'content-type': 'application/x-www-form-urlencoded' }),
        ...prepared.headers,
      },
      ...(example.body === undefined ? {} : { payload: prepared.body ?? (prepared.totpCode === undefined ? example.body : { ...example.body, code: prepared.totpCode }) }),
      ...(example.form === undefined ? {} : { payload: new URLSearchParams(example.form).toString() }),
    });
    const status = documentedStatus(op.operation);
    expect(res.statusCode, res.body).toBe(status);
    // The answer matches what the document says that status carries.
    const content = ((op.operation.responses as Json)[String(status)] as Json).content as Json | undefined;
    if (content?.['application/json'] !== undefined) {
      expect(validate(content['application/json'].schema, res.json()), res.body).toBeUndefined();
    } else if (content === undefined) {
      expect(res.body).toBe('');
    }
  });
});
