import type { LightMyRequestResponse } from 'fastify';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, expectError, PASSWORD, postJson, refresh, refreshCookieOf, resetCode, setCookies, signIn, textOf, withBearer } from '../helpers/flows.js';
import { noticesTo } from '../helpers/mail.js';
import { enrolled } from '../helpers/mfa.js';
import { passkeySignIn, postAssertion, register, registrationOptions, signInOptions, withPasskey } from '../helpers/passkeys.js';
import { SoftwareAuthenticator } from '../helpers/webauthn.js';

/**
 * Passkeys (docs/api.md#passkeys) through HTTP with a software authenticator
 * (test/helpers/webauthn.ts): every status and error code of registration, listing, renaming,
 * deletion and sign-in; challenges single use, 300 s, bound to the cookie; replayed assertions,
 * a counter that goes backwards, a wrong origin or RP ID, no user verification, another user's
 * passkey: each refused; the limit of 10; notices; the account's lifecycle.
 */
let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext({}, { startOutboxWorker: false });
});
afterAll(async () => ctx.close());

const PASSKEY_KEYS = ['created_at', 'id', 'last_used_at', 'name'];

describe('registration', () => {
  it('options: a fresh challenge, the relying party from configuration, a random stable user handle, resident key and user verification required', async () => {
    const user = await createVerifiedUser(ctx);
    const session = await signIn(ctx, { username: user.username, password: PASSWORD });
    const first = await registrationOptions(ctx, session.accessToken);
    const second = await registrationOptions(ctx, session.accessToken);
    expect(first.rp).toEqual({ id: 'localhost', name: 'Latchkey' });
    expect(first.challenge).not.toBe(second.challenge);
    expect(Buffer.from(first.challenge, 'base64url').length).toBeGreaterThanOrEqual(16);
    // The user handle: 32 random bytes, the same for every registration of the account, and no username or email in it.
    expect(second.user.id).toBe(first.user.id);
    const handle = Buffer.from(first.user.id, 'base64url');
    expect(handle.length).toBe(32);
    expect(handle.toString('latin1')).not.toContain(user.username);
    expect(first.user.id).not.toContain(Buffer.from(user.email).toString('base64url').slice(0, 8));
    expect(first.authenticatorSelection).toEqual({ residentKey: 'required', requireResidentKey: true, userVerification: 'required' });
    expect(first.excludeCredentials).toEqual([]);
    const other = await createVerifiedUser(ctx);
    const otherSession = await signIn(ctx, { username: other.username, password: PASSWORD });
    expect((await registrationOptions(ctx, otherSession.accessToken)).user.id).not.toBe(first.user.id);
  });

  it('201 with exactly the Passkey members; a notice to the owner names it; the next options exclude it', async () => {
    const { user, session, passkey } = await withPasskey(ctx);
    expect(Object.keys(passkey).sort()).toEqual(PASSKEY_KEYS);
    expect(passkey).toMatchObject({ name: 'Laptop', last_used_at: null });
    const added = `${ctx.clock.now().toISOString().slice(0, 16).replace('T', ' ')} UTC`;
    expect(await noticesTo(ctx, user.email)).toEqual([{ notice: 'passkey_added', details: [`Passkey "Laptop", added ${added}, never used to sign in`] }]);
    const options = await registrationOptions(ctx, session.accessToken);
    expect(options.excludeCredentials.map((c) => c.id)).toHaveLength(1);
  });

  it('400 auth.passkeys.validation_failed: a challenge not issued, used, expired or another user\'s; wrong origin or RP ID; no user verification; a bad body', async () => {
    const user = await createVerifiedUser(ctx);
    const { accessToken } = await signIn(ctx, { username: user.username, password: PASSWORD });
    const authenticator = new SoftwareAuthenticator();
    const post = (body: unknown) => withBearer(ctx, 'POST', '/auth/v0/passkeys/registration', accessToken, body);

    // Each try uses up the challenge it names, whatever its outcome: every case gets fresh options.
    const fresh = () => registrationOptions(ctx, accessToken);
    expectError(await post({ response: authenticator.create(await fresh(), { challenge: Buffer.from('not issued').toString('base64url') }) }), 400, 'auth.passkeys.validation_failed');
    for (const overrides of [{ origin: 'https://evil.example' }, { origin: 'http://localhost:3001' }, { rpId: 'evil.example' }, { userVerified: false }, { userPresent: false }, { type: 'webauthn.get' }]) {
      expectError(await post({ response: authenticator.create(await fresh(), overrides) }), 400, 'auth.passkeys.validation_failed');
    }
    // The credential id: 1 to 1023 bytes, and the one the response names (W3C WebAuthn Level 3 §7.1).
    expectError(await post({ response: authenticator.create(await fresh(), { credentialId: Buffer.alloc(1024, 7) }) }), 400, 'auth.passkeys.validation_failed');
    expectError(await post({ response: authenticator.create(await fresh(), { credentialId: Buffer.alloc(0), responseId: 'AAAA' }) }), 400, 'auth.passkeys.validation_failed');
    expectError(await post({ response: authenticator.create(await fresh(), { responseId: 'AAAAAAAAAAAAAAAAAAAAAA' }) }), 400, 'auth.passkeys.validation_failed');
    // A credential the client says is not discoverable could never sign in here.
    expectError(await post({ response: authenticator.create(await fresh(), { clientExtensionResults: { credProps: { rk: false } } }) }), 400, 'auth.passkeys.validation_failed');
    const used = await fresh();
    expect((await post({ response: authenticator.create(used) })).statusCode).toBe(201);
    expectError(await post({ response: authenticator.create(used) }), 400, 'auth.passkeys.validation_failed');

    const stale = await registrationOptions(ctx, accessToken);
    ctx.clock.advance(301);
    expectError(await post({ response: authenticator.create(stale) }), 400, 'auth.passkeys.validation_failed');

    const other = await createVerifiedUser(ctx);
    const otherSession = await signIn(ctx, { username: other.username, password: PASSWORD });
    const othersOptions = await registrationOptions(ctx, otherSession.accessToken);
    expectError(await post({ response: authenticator.create(othersOptions) }), 400, 'auth.passkeys.validation_failed');

    const good = authenticator.create(await registrationOptions(ctx, accessToken));
    expectError(await post({ response: good, extra: 1 }), 400, 'auth.passkeys.validation_failed');
    expectError(await post({ response: { ...good, extra: 1 } }), 400, 'auth.passkeys.validation_failed');
    expectError(await post({ response: good, name: 'x'.repeat(65) }), 400, 'auth.passkeys.validation_failed');
    for (const name of ['two\nlines', 'a\u2028b', 'evil\u202Eexample', 'zero\u200Bwidth']) {
      expectError(await post({ response: good, name }), 400, 'auth.passkeys.validation_failed');
    }
    expectError(await post({}), 400, 'auth.passkeys.validation_failed');
    expect(((await withBearer(ctx, 'GET', '/auth/v0/passkeys', accessToken)).json() as { passkeys: unknown[] }).passkeys).toHaveLength(1);
    // The same response, once valid: 201 (the bad bodies above never reached the challenge).
    expect((await post({ response: good, name: '  ' })).json()).toMatchObject({ passkey: { name: null } });
  });

  it('a credential id already registered, to the same user or another, is 400; unknown transports are not stored', async () => {
    const a = await withPasskey(ctx);
    const taken = Buffer.from([...a.authenticator.credentials.keys()][0]!, 'base64url');
    const again = await registrationOptions(ctx, a.session.accessToken);
    expect(again.excludeCredentials).toEqual([{ id: taken.toString('base64url'), type: 'public-key', transports: ['internal'] }]);
    const post = (token: string, response: unknown) => withBearer(ctx, 'POST', '/auth/v0/passkeys/registration', token, { response });
    expectError(await post(a.session.accessToken, new SoftwareAuthenticator().create(again, { credentialId: taken })), 400, 'auth.passkeys.validation_failed');
    const b = await createVerifiedUser(ctx);
    const bSession = await signIn(ctx, { username: b.username, password: PASSWORD });
    expectError(await post(bSession.accessToken, new SoftwareAuthenticator().create(await registrationOptions(ctx, bSession.accessToken), { credentialId: taken })), 400, 'auth.passkeys.validation_failed');
    expect(((await withBearer(ctx, 'GET', '/auth/v0/passkeys', bSession.accessToken)).json() as { passkeys: unknown[] }).passkeys).toEqual([]);
    const created = await post(bSession.accessToken, new SoftwareAuthenticator().create(await registrationOptions(ctx, bSession.accessToken), { transports: ['usb', 'bogus-transport', 'hybrid'] }));
    expect(created.statusCode, created.body).toBe(201);
    expect((await registrationOptions(ctx, bSession.accessToken)).excludeCredentials[0]).toMatchObject({ transports: ['usb', 'hybrid'] });
  });

  it('401 without a Bearer token', async () => {
    expectError(await ctx.app.inject({ method: 'POST', url: '/auth/v0/passkeys/registration/options' }), 401, 'auth.missing_access_token');
    expectError(await postJson(ctx, '/auth/v0/passkeys/registration', { response: {} }), 401, 'auth.missing_access_token');
    expectError(await ctx.app.inject({ method: 'GET', url: '/auth/v0/passkeys' }), 401, 'auth.missing_access_token');
  });

  it('409 auth.passkeys.limit_reached at 10 passkeys, at options and at registration, also for registrations in parallel', async () => {
    const user = await createVerifiedUser(ctx);
    const { accessToken } = await signIn(ctx, { username: user.username, password: PASSWORD });
    const authenticator = new SoftwareAuthenticator();
    for (let i = 0; i < 8; i++) expect((await register(ctx, accessToken, authenticator)).statusCode).toBe(201);
    // Two registrations in flight at 8 (with the third options below, the most live challenges a
    // user keeps): both fit. Two at 9: one fits.
    const racing = await Promise.all([0, 1].map(() => registrationOptions(ctx, accessToken)));
    await register(ctx, accessToken, authenticator);
    const statuses = (
      await Promise.all(racing.map((options) => withBearer(ctx, 'POST', '/auth/v0/passkeys/registration', accessToken, { response: authenticator.create(options) })))
    ).map((r) => r.statusCode);
    expect(statuses.sort()).toEqual([201, 409]);
    expect(((await withBearer(ctx, 'GET', '/auth/v0/passkeys', accessToken)).json() as { passkeys: unknown[] }).passkeys).toHaveLength(10);
    expectError(await withBearer(ctx, 'POST', '/auth/v0/passkeys/registration/options', accessToken), 409, 'auth.passkeys.limit_reached');
  });
});

describe('listing, renaming, deletion', () => {
  it('lists the caller\'s passkeys only; renames; another user\'s passkey is 403 and stays; unknown or malformed ids are 404', async () => {
    const a = await withPasskey(ctx);
    const b = await withPasskey(ctx);
    const list = (await withBearer(ctx, 'GET', '/auth/v0/passkeys', a.session.accessToken)).json() as { passkeys: Record<string, unknown>[] };
    expect(list.passkeys).toEqual([a.passkey]);

    const renamed = await withBearer(ctx, 'PATCH', `/auth/v0/passkeys/${a.passkey.id}`, a.session.accessToken, { name: 'Work laptop' });
    expect(renamed.statusCode, renamed.body).toBe(200);
    expect(renamed.json()).toEqual({ passkey: { ...a.passkey, name: 'Work laptop' } });
    expect((await withBearer(ctx, 'PATCH', `/auth/v0/passkeys/${a.passkey.id}`, a.session.accessToken, { name: null })).json()).toMatchObject({ passkey: { name: null } });

    // Better Auth's CVE-2025-71400: one user deleting another's passkeys. Here: 403, and nothing changes.
    expectError(await withBearer(ctx, 'DELETE', `/auth/v0/passkeys/${b.passkey.id}`, a.session.accessToken), 403, 'auth.passkeys.forbidden');
    expectError(await withBearer(ctx, 'PATCH', `/auth/v0/passkeys/${b.passkey.id}`, a.session.accessToken, { name: 'mine' }), 403, 'auth.passkeys.forbidden');
    expect((await withBearer(ctx, 'GET', '/auth/v0/passkeys', b.session.accessToken)).json()).toEqual({ passkeys: [b.passkey] });
    expect((await passkeySignIn(ctx, b.authenticator)).res.statusCode).toBe(200);

    expectError(await withBearer(ctx, 'DELETE', '/auth/v0/passkeys/6f1c2b3a-0000-4000-8000-000000000000', a.session.accessToken), 404, 'auth.passkeys.not_found');
    expectError(await withBearer(ctx, 'DELETE', '/auth/v0/passkeys/not-a-uuid', a.session.accessToken), 404, 'auth.passkeys.not_found');
    expectError(await withBearer(ctx, 'PATCH', '/auth/v0/passkeys/not-a-uuid', a.session.accessToken, { name: 'x' }), 404, 'auth.passkeys.not_found');
    expectError(await withBearer(ctx, 'PATCH', `/auth/v0/passkeys/${a.passkey.id}`, a.session.accessToken, { name: 'x', other: 1 }), 400, 'auth.passkeys.validation_failed');
  });

  it('deletion: 204, a notice naming it, it no longer signs in, and deleting it again is 404', async () => {
    const { user, session, authenticator, passkey } = await withPasskey(ctx);
    const res = await withBearer(ctx, 'DELETE', `/auth/v0/passkeys/${passkey.id}`, session.accessToken);
    expect(res.statusCode, res.body).toBe(204);
    expect(res.body).toBe('');
    expect((await noticesTo(ctx, user.email)).map((n) => n.notice)).toEqual(['passkey_added', 'passkey_removed']);
    expect((await noticesTo(ctx, user.email))[1]!.details).toEqual([expect.stringMatching(/^Passkey "Laptop", added \d{4}-\d\d-\d\d \d\d:\d\d UTC, never used to sign in$/)]);
    expectError((await passkeySignIn(ctx, authenticator)).res, 401, 'auth.passkeys.invalid_response');
    expectError(await withBearer(ctx, 'DELETE', `/auth/v0/passkeys/${passkey.id}`, session.accessToken), 404, 'auth.passkeys.not_found');
  });
});

describe('sign-in with a passkey', () => {
  it('options set the challenge cookie: HttpOnly, Secure, SameSite=Strict, its own path, 300 s; discoverable, user verification required', async () => {
    const { options, res } = await signInOptions(ctx);
    expect(options).toEqual({ rpId: 'localhost', challenge: expect.any(String), timeout: 300_000, userVerification: 'required' });
    const cookie = setCookies(res).find((x) => x.name === 'webauthn_challenge')!;
    expect(cookie.value).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(cookie.attributes).toEqual({ path: '/auth/v0/sign-in/passkey', httponly: true, secure: true, samesite: 'Strict', 'max-age': '300' });
  });

  it('200: a session like a password sign-in, amr hwk+user kept across refreshes, last_used_at set, the cookie cleared', async () => {
    const a = await withPasskey(ctx);
    const { res } = await passkeySignIn(ctx, a.authenticator);
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json() as { user: { id: string }; session_id: string; tokens: { access_token: string } };
    expect(Object.keys(body).sort()).toEqual(['session_id', 'tokens', 'user']);
    expect(body.user.id).toBe(a.user.id);
    expect(decodeJwt(body.tokens.access_token)).toMatchObject({ sub: a.user.id, sid: body.session_id, amr: ['hwk', 'user'] });
    const me = await withBearer(ctx, 'GET', '/auth/v0/me', body.tokens.access_token);
    expect(me.statusCode).toBe(200);
    const cleared = setCookies(res).find((x) => x.name === 'webauthn_challenge')!;
    expect(cleared).toMatchObject({ value: '', attributes: { 'max-age': '0', path: '/auth/v0/sign-in/passkey' } });
    const refreshed = await refresh(ctx, refreshCookieOf(res).value);
    expect(refreshed.statusCode).toBe(200);
    expect(decodeJwt((refreshed.json() as { tokens: { access_token: string } }).tokens.access_token).amr).toEqual(['hwk', 'user']);
    const listed = (await withBearer(ctx, 'GET', '/auth/v0/passkeys', a.session.accessToken)).json() as { passkeys: { last_used_at: string | null }[] };
    expect(listed.passkeys[0]!.last_used_at).toBe(ctx.clock.now().toISOString());
  });

  it('a user with TOTP on signs in with a passkey without a code', async () => {
    const { user, session } = await enrolled(ctx);
    const authenticator = new SoftwareAuthenticator();
    expect((await register(ctx, session.accessToken, authenticator)).statusCode).toBe(201);
    const { res } = await passkeySignIn(ctx, authenticator);
    expect(res.statusCode, res.body).toBe(200);
    expect((res.json() as { user: { id: string } }).user.id).toBe(user.id);
  });

  it('401 auth.passkeys.missing_challenge without the cookie', async () => {
    const { authenticator } = await withPasskey(ctx);
    const { options } = await signInOptions(ctx);
    expectError(await postAssertion(ctx, undefined, authenticator.get(options)), 401, 'auth.passkeys.missing_challenge');
  });

  it('401 auth.passkeys.invalid_response: a replayed assertion, another challenge, an expired or unknown cookie', async () => {
    const { authenticator } = await withPasskey(ctx);
    const first = await passkeySignIn(ctx, authenticator);
    expect(first.res.statusCode).toBe(200);
    // The same request again: its challenge was used.
    expectError(await postAssertion(ctx, first.cookie, first.response), 401, 'auth.passkeys.invalid_response');
    // The same assertion under a fresh challenge cookie: it signs the old challenge.
    const { cookie } = await signInOptions(ctx);
    expectError(await postAssertion(ctx, cookie, first.response), 401, 'auth.passkeys.invalid_response');
    // A challenge past its 300 s.
    const stale = await signInOptions(ctx);
    ctx.clock.advance(301);
    expectError(await postAssertion(ctx, stale.cookie, authenticator.get(stale.options)), 401, 'auth.passkeys.invalid_response');
    expectError(await postAssertion(ctx, 'A'.repeat(43), authenticator.get(stale.options)), 401, 'auth.passkeys.invalid_response');
  });

  it('an assertion is bound to the cookie of its challenge: a fresh assertion for one challenge, sent with another challenge\'s cookie, is 401, and that cookie is spent', async () => {
    const { authenticator } = await withPasskey(ctx);
    const mine = await signInOptions(ctx);
    const other = await signInOptions(ctx);
    const res = await postAssertion(ctx, other.cookie, authenticator.get(mine.options));
    expectError(res, 401, 'auth.passkeys.invalid_response');
    expect(setCookies(res).find((c) => c.name === 'webauthn_challenge')).toMatchObject({ value: '', attributes: { 'max-age': '0' } });
    // The other challenge was used by that try; its own right assertion is now refused too.
    expectError(await postAssertion(ctx, other.cookie, authenticator.get(other.options)), 401, 'auth.passkeys.invalid_response');
    // The first one is still live.
    expect((await postAssertion(ctx, mine.cookie, authenticator.get(mine.options))).statusCode).toBe(200);
  });

  it('a passkey that keeps no counter (synced passkeys report 0): the challenge alone stops replay, sequential and racing', async () => {
    const { authenticator } = await withPasskey(ctx);
    const zero = { overrides: { counter: 0 } };
    const first = await passkeySignIn(ctx, authenticator, zero);
    expect(first.res.statusCode).toBe(200);
    expectError(await postAssertion(ctx, first.cookie, first.response), 401, 'auth.passkeys.invalid_response');
    expectError(await postAssertion(ctx, (await signInOptions(ctx)).cookie, first.response), 401, 'auth.passkeys.invalid_response');
    const { options, cookie } = await signInOptions(ctx);
    const response = authenticator.get(options, undefined, { counter: 0 });
    const statuses = (await Promise.all([0, 1, 2].map(() => postAssertion(ctx, cookie, response)))).map((r) => r.statusCode);
    expect(statuses.sort()).toEqual([200, 401, 401]);
    expect((await passkeySignIn(ctx, authenticator, zero)).res.statusCode).toBe(200);
  });

  it('a cloned authenticator: two assertions with one counter under two challenges, in parallel, sign in once', async () => {
    const { authenticator } = await withPasskey(ctx);
    const [a, b] = await Promise.all([signInOptions(ctx), signInOptions(ctx)]);
    const ra = authenticator.get(a.options, undefined, { counter: 7 });
    const rb = authenticator.get(b.options, undefined, { counter: 7 });
    const statuses = (await Promise.all([postAssertion(ctx, a.cookie, ra), postAssertion(ctx, b.cookie, rb)])).map((r) => r.statusCode);
    expect(statuses.sort()).toEqual([200, 401]);
  });

  it('two requests with one assertion and one cookie: one 200', async () => {
    const { authenticator } = await withPasskey(ctx);
    const { options, cookie } = await signInOptions(ctx);
    const response = authenticator.get(options);
    const statuses = (await Promise.all([0, 1, 2].map(() => postAssertion(ctx, cookie, response)))).map((r) => r.statusCode);
    expect(statuses.sort()).toEqual([200, 401, 401]);
  });

  it('401: a counter that goes backwards or stays, a wrong origin or RP ID, no user verification, no user presence, an unknown credential, a wrong user handle', async () => {
    const { authenticator } = await withPasskey(ctx);
    expect((await passkeySignIn(ctx, authenticator, { overrides: { counter: 5 } })).res.statusCode).toBe(200);
    for (const overrides of [{ counter: 4 }, { counter: 5 }, { origin: 'https://evil.example' }, { origin: 'http://localhost:3001' }, { rpId: 'evil.example' }, { userVerified: false }, { userPresent: false }, { type: 'webauthn.create' }]) {
      expectError((await passkeySignIn(ctx, authenticator, { overrides })).res, 401, 'auth.passkeys.invalid_response');
    }
    // A credential the service never saw.
    const stranger = new SoftwareAuthenticator();
    stranger.create({ challenge: 'x', user: { id: Buffer.alloc(32).toString('base64url') }, rp: { id: 'localhost' } });
    expectError((await passkeySignIn(ctx, stranger)).res, 401, 'auth.passkeys.invalid_response');
    // No user handle, or another one.
    expectError((await passkeySignIn(ctx, authenticator, { overrides: { userHandle: null } })).res, 401, 'auth.passkeys.invalid_response');
    expectError((await passkeySignIn(ctx, authenticator, { overrides: { userHandle: Buffer.alloc(32, 1).toString('base64url') } })).res, 401, 'auth.passkeys.invalid_response');
    // After all that, the right assertion still signs in.
    expect((await passkeySignIn(ctx, authenticator)).res.statusCode).toBe(200);
  });

  it("another user's passkey: an assertion of one user's credential naming another user's handle is refused", async () => {
    const a = await withPasskey(ctx);
    const b = await withPasskey(ctx);
    const bHandle = [...b.authenticator.credentials.values()][0]!.userHandle;
    expectError((await passkeySignIn(ctx, a.authenticator, { overrides: { userHandle: bHandle } })).res, 401, 'auth.passkeys.invalid_response');
    // Signed by the wrong key: a's private key, b's credential id.
    const bCredential = [...b.authenticator.credentials.values()][0]!;
    const forged = new SoftwareAuthenticator();
    forged.credentials.set(bCredential.id, { ...[...a.authenticator.credentials.values()][0]!, id: bCredential.id, userHandle: bHandle, counter: 100 });
    expectError((await passkeySignIn(ctx, forged)).res, 401, 'auth.passkeys.invalid_response');
  });

  it('400 for a malformed body', async () => {
    const { cookie } = await signInOptions(ctx);
    expectError(await postAssertion(ctx, cookie, { id: 'x' }), 400, 'auth.passkeys.validation_failed');
    expectError(await postAssertion(ctx, cookie, 'nonsense'), 400, 'auth.passkeys.validation_failed');
  });

  it('403 auth.email_not_verified for an account whose email is not verified, after the assertion verified', async () => {
    const { user, authenticator } = await withPasskey(ctx);
    await ctx.db.query('UPDATE users SET is_email_verified = false WHERE id = $1', [user.id]);
    expectError((await passkeySignIn(ctx, authenticator)).res, 403, 'auth.email_not_verified');
    // A wrong assertion still says only 401.
    expectError((await passkeySignIn(ctx, authenticator, { overrides: { origin: 'https://evil.example' } })).res, 401, 'auth.passkeys.invalid_response');
    await ctx.db.query('UPDATE users SET is_email_verified = true WHERE id = $1', [user.id]);
  });
});

describe('rate limits', () => {
  let limited: TestContext;
  beforeAll(async () => {
    limited = await createTestContext({ RATE_LIMIT_SIGN_IN_PER_IP: '3', RATE_LIMIT_SIGN_IN_PER_ACCOUNT: '3' }, { startOutboxWorker: false });
  });
  afterAll(async () => limited.close());

  it('failed passkey sign-ins count against the client\'s sign-in limit: 429 with Retry-After; a success takes its count back', async () => {
    const { authenticator } = await withPasskey(limited);
    for (let i = 0; i < 2; i++) expect((await passkeySignIn(limited, authenticator)).res.statusCode).toBe(200);
    for (let i = 0; i < 3; i++) expectError((await passkeySignIn(limited, authenticator, { overrides: { userVerified: false } })).res, 401, 'auth.passkeys.invalid_response');
    const { res } = await passkeySignIn(limited, authenticator);
    expectError(res, 429, 'auth.sign_in.too_many_attempts');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    limited.clock.advance(15 * 60);
  });

  it('sign-in options count per client (4 per allowed sign-in attempt: 12 here), each storing a challenge: then 429 with Retry-After', async () => {
    limited.clock.advance(15 * 60);
    for (let i = 0; i < 12; i++) await signInOptions(limited);
    const res = await limited.app.inject({ method: 'POST', url: '/auth/v0/sign-in/passkey/options' });
    expectError(res, 429, 'auth.sign_in.too_many_attempts');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
    expect(setCookies(res)).toEqual([]);
    limited.clock.advance(15 * 60);
  });

  it('an account locked by failed password sign-ins is locked for passkeys too', async () => {
    const { user, authenticator } = await withPasskey(limited);
    for (let i = 0; i < 3; i++) {
      limited.clock.advance(15 * 60); // past the per-client window, so only the account's count adds up
      expect((await postJson(limited, '/auth/v0/sign-in', { username: user.username, password: 'wrong password' })).statusCode).toBe(401);
    }
    limited.clock.advance(15 * 60);
    const { res } = await passkeySignIn(limited, authenticator);
    expectError(res, 429, 'auth.sign_in.too_many_attempts');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
  });
});

describe('account lifecycle', () => {
  it('deleting the account deletes its passkeys and their challenges; the credential no longer signs in', async () => {
    const { user, session, authenticator } = await withPasskey(ctx);
    await registrationOptions(ctx, session.accessToken);
    const res = await withBearer(ctx, 'POST', '/auth/v0/delete-account', session.accessToken, { password: PASSWORD });
    expect(res.statusCode, res.body).toBe(204);
    expect((await ctx.db.query('SELECT 1 FROM passkeys WHERE user_id = $1', [user.id])).rows).toEqual([]);
    expect((await ctx.db.query('SELECT 1 FROM webauthn_challenges WHERE user_id = $1', [user.id])).rows).toEqual([]);
    expectError((await passkeySignIn(ctx, authenticator)).res, 401, 'auth.passkeys.invalid_response');
  });

  it('a password reset keeps the passkeys, and its notice lists them', async () => {
    const { user, session, authenticator } = await withPasskey(ctx);
    expect((await passkeySignIn(ctx, authenticator)).res.statusCode).toBe(200);
    ctx.clock.advance(1);
    expect((await register(ctx, session.accessToken, new SoftwareAuthenticator(), { name: null })).statusCode).toBe(201);
    expect((await postJson(ctx, '/auth/v0/password-reset', { email: user.email })).statusCode).toBe(204);
    const { code } = await resetCode(ctx, user.email);
    const done = await postJson(ctx, '/auth/v0/password-reset/confirm', { email: user.email, code, new_password: 'plum tractor velvet harbour' });
    expect(done.statusCode, done.body).toBe(204);
    const notice = (await noticesTo(ctx, user.email)).find((n) => n.notice === 'password_reset')!;
    expect(notice.details).toEqual([
      'The account keeps its passkeys; each still signs in. Delete any you do not recognise under Passkeys:',
      expect.stringMatching(/^Passkey "Laptop", added .* UTC, last signed in .* UTC$/),
      expect.stringMatching(/^Passkey \(no name\), added .* UTC, never used to sign in$/),
    ]);
    const sent = ctx.smtp.messages.filter((m) => m.to.includes(user.email) && m.raw.includes('Subject: Your password was reset'));
    for (let i = 0; i < 50 && sent.length === 0; i++) {
      await ctx.app.outbox.runOnce();
      sent.push(...ctx.smtp.messages.filter((m) => m.to.includes(user.email) && m.raw.includes('Subject: Your password was reset')));
    }
    expect(textOf(sent[0]!)).toContain('Passkey "Laptop", added');
    expect((await passkeySignIn(ctx, authenticator)).res.statusCode).toBe(200);
  });
});

describe('retention', () => {
  it('the retention worker deletes expired challenges and keeps live ones', async () => {
    const user = await createVerifiedUser(ctx);
    const { accessToken } = await signIn(ctx, { username: user.username, password: PASSWORD });
    await ctx.db.query('DELETE FROM webauthn_challenges');
    await registrationOptions(ctx, accessToken);
    await signInOptions(ctx);
    ctx.clock.advance(301);
    const live = await registrationOptions(ctx, accessToken);
    const liveSignIn = await signInOptions(ctx);
    const report = await ctx.app.retention.runOnce();
    expect(report.webauthnChallenges).toBe(2);
    const { rows } = await ctx.db.query<{ challenge: string }>('SELECT challenge FROM webauthn_challenges ORDER BY challenge');
    expect(rows.map((r) => r.challenge)).toEqual([live.challenge, liveSignIn.options.challenge].sort());
  });
});

describe('metrics and log', () => {
  it('counts sign-ins and changes; no assertion, challenge or cookie reaches the log', async () => {
    const { authenticator } = await withPasskey(ctx);
    const { res, cookie, response } = await passkeySignIn(ctx, authenticator);
    expect(res.statusCode).toBe(200);
    await passkeySignIn(ctx, authenticator, { overrides: { userVerified: false } });
    const metrics = (await ctx.app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toMatch(/auth_passkey_sign_in_total\{outcome="success"\} [1-9]/);
    expect(metrics).toMatch(/auth_passkey_sign_in_total\{outcome="invalid_response"\} [1-9]/);
    expect(metrics).toMatch(/auth_passkey_changes_total\{change="registered"\} [1-9]/);
    const log = ctx.rawLogs.join('');
    expect(log).not.toContain(cookie);
    expect(log).not.toContain((response as { response: { signature: string } }).response.signature);
    expect(log).toContain('passkey.sign_in_failed');
  });
});
