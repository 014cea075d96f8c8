import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVerifiedUser, emailChangeCode, latestCode, PASSWORD, resetCode, signIn, uniqueName } from '../helpers/flows.js';
import { stepAt, totpForStep } from '../helpers/totp.js';
import { answerErrors, CLIENT_CONTRACT, type ContractOperation } from './client-contract.js';
import { addVirtualAuthenticator, CHROMIUM, CHROMIUM_ARGS, INSECURE_HOST, SKIP_BROWSER, startFrontDoor, type FrontDoor } from './browser-harness.js';

/** What the page's `run(op, ...args)` gives back: the parsed body, or the LatchkeyError's fields. */
type Outcome = { ok: unknown; error?: undefined } | { ok?: undefined; error: { name: string; code: string; message: string; status: number; retryAfter: number | null } };

describe.skipIf(SKIP_BROWSER)('@latchkey/client in Chromium: every operation of the service, its parsed body or its LatchkeyError', () => {
  let door: FrontDoor;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    door = await startFrontDoor({});
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
    page = await (await browser.newContext()).newPage();
    await page.goto(`${door.origin}/app/`);
    expect(await page.evaluate<boolean>('window.client.ready')).toBe(false);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await door?.close();
  });

  /**
   * Calls the operation at `op` on the client (`'me'`, `'mfa.verify'`) in the page. An answer it
   * resolves to must conform to its route's answer schema (test/clients/client-contract.ts), which
   * the client's declared types equal: the service's real answers have the shapes the client declares.
   */
  const run = async (op: string, ...args: unknown[]): Promise<Outcome> => {
    const outcome = await page.evaluate(([o, a]) => (globalThis as unknown as { run(op: string, ...args: unknown[]): Promise<Outcome> }).run(o, ...a), [op, args] as const);
    // refresh() resolves to a boolean, linkProvider() navigates: neither resolves to the answer.
    if (outcome.ok !== undefined && op in CLIENT_CONTRACT && op !== 'refresh' && op !== 'linkProvider') expect(answerErrors(op as ContractOperation, outcome.ok), `${op}'s answer`).toEqual([]);
    return outcome;
  };
  /** The error fields expected for a service error code. */
  const refused = (code: string, status: number, retryAfter: number | null = null) => ({ error: { name: 'LatchkeyError', code, message: expect.any(String), status, retryAfter } });
  const signedIn = () => page.evaluate<boolean>('window.client.signedIn');
  const createUser = () => createVerifiedUser(door.ctx, { password: PASSWORD });
  const lastSignOut = () => page.evaluate<string | undefined>("window.events.filter((e) => e.name === 'signedOut').at(-1)?.reason");

  it('sign-up to account deletion, through the client only', async () => {
    const username = uniqueName('client');
    const email = `${username}@example.test`;
    const newEmail = `${username}.new@example.test`;

    const created = await run('signUp', { username, email, password: PASSWORD });
    expect(created.ok).toMatchObject({ user: { username, email, is_email_verified: false } });
    expect(await run('signUp', { username, email, password: PASSWORD })).toEqual(refused('auth.sign_up.username_taken', 409));
    expect(await run('signIn', { username, password: PASSWORD })).toEqual(refused('auth.email_not_verified', 403));
    expect(await run('verifyEmail', { email, code: await latestCode(door.ctx, email) })).toEqual({ ok: null });
    // Resend is 204 for any address, then limited to one per address per 60 s: 429 with Retry-After.
    expect(await run('resendVerification', { email })).toEqual({ ok: null });
    const again = await run('resendVerification', { email });
    expect(again).toEqual(refused('auth.resend_verification.too_many_attempts', 429, expect.any(Number)));
    expect(again.error!.retryAfter).toBeGreaterThanOrEqual(1);
    expect(again.error!.retryAfter).toBeLessThanOrEqual(60);

    expect(await run('signIn', { username, password: 'not the password' })).toEqual(refused('auth.invalid_credentials', 401));
    const session = await run('signIn', { username, password: PASSWORD });
    expect(session.ok).toMatchObject({ user: { username, is_email_verified: true }, session_id: expect.any(String) });
    const sessionId = (session.ok as { session_id: string }).session_id;
    expect(await signedIn()).toBe(true);
    expect(await page.evaluate<string>('window.client.sessionId')).toBe(sessionId);
    expect(await run('me')).toEqual({ ok: { user: expect.objectContaining({ username }), session_id: sessionId } });
    expect(((await run('jwks')).ok as { keys: { kid: string }[] }).keys.length).toBeGreaterThanOrEqual(1);
    expect(await page.evaluate<string | null>('window.client.accessToken()')).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);

    // Sessions: another device's session is listed, then revoked from here.
    const other = await signIn(door.ctx, { username, password: PASSWORD });
    const listed = (await run('sessions.list')).ok as { sessions: { id: string; current: boolean }[] };
    expect(listed.sessions.map((s) => [s.id, s.current])).toEqual([
      [sessionId, true],
      [other.sessionId, false],
    ]);
    expect(await run('sessions.revoke', other.sessionId)).toEqual({ ok: null });
    expect(((await run('sessions.list')).ok as { sessions: unknown[] }).sessions).toHaveLength(1);
    expect(await run('sessions.revoke', '00000000-0000-4000-8000-000000000000')).toEqual(refused('auth.session_not_found', 404));

    // Email change: a code to the new address, then confirmed; the session goes on.
    expect(await run('changeEmail', { new_email: newEmail, password: 'not the password' })).toEqual(refused('auth.invalid_current_password', 401));
    expect(await run('changeEmail', { new_email: newEmail, password: PASSWORD })).toEqual({ ok: null });
    expect(await run('confirmEmailChange', { code: await emailChangeCode(door.ctx, newEmail) })).toEqual({ ok: { user: expect.objectContaining({ email: newEmail, is_email_verified: true }) } });
    expect(await signedIn()).toBe(true);

    // Change password: every session ends, so the client signs out.
    const newPassword = `${PASSWORD} 2`;
    expect(await run('changePassword', { current_password: 'wrong', new_password: newPassword })).toEqual(refused('auth.invalid_current_password', 401));
    expect(await run('changePassword', { current_password: PASSWORD, new_password: newPassword })).toEqual({ ok: null });
    expect(await signedIn()).toBe(false);
    expect(await lastSignOut()).toBe('password_changed');
    expect(await run('me')).toEqual(refused('auth.missing_access_token', 401));

    // Password reset by code.
    expect(await run('requestPasswordReset', { email: newEmail })).toEqual({ ok: null });
    const reset = await resetCode(door.ctx, newEmail);
    const resetPassword = `${PASSWORD} 3`;
    expect(await run('confirmPasswordReset', { email: newEmail, code: '000000' === reset.code ? '111111' : '000000', new_password: resetPassword })).toEqual(refused('auth.password_reset.code_mismatch', 410));
    expect(await run('confirmPasswordReset', { email: newEmail, code: reset.code, new_password: resetPassword })).toEqual({ ok: null });

    // Revoke all sessions, then delete the account.
    expect((await run('signIn', { email: newEmail, password: resetPassword })).ok).toBeDefined();
    expect(await run('sessions.revokeAll')).toEqual({ ok: null });
    expect(await signedIn()).toBe(false);
    expect(await lastSignOut()).toBe('sessions_revoked');
    expect((await run('signIn', { username, password: resetPassword })).ok).toBeDefined();
    expect(await run('deleteAccount', { password: resetPassword })).toEqual({ ok: null });
    expect(await signedIn()).toBe(false);
    expect(await lastSignOut()).toBe('account_deleted');
    expect(await run('signIn', { username, password: resetPassword })).toEqual(refused('auth.invalid_credentials', 401));
  }, 90_000);

  it('two-step sign-in: TOTP set up and enabled through the client, then signIn throws auth.mfa_required and mfa.verify completes it', async () => {
    const user = await createUser();
    expect((await run('signIn', { username: user.username, password: PASSWORD })).ok).toBeDefined();
    const setup = (await run('mfa.setUp', { password: PASSWORD })).ok as { secret: string; otpauth_uri: string };
    expect(setup.otpauth_uri).toMatch(/^otpauth:\/\/totp\//);
    const code = (offset = 0) => totpForStep(setup.secret, stepAt(new Date()) + offset);
    const enabled = (await run('mfa.enable', { code: code() })).ok as { recovery_codes: string[] };
    expect(enabled.recovery_codes).toHaveLength(10);
    expect(await run('logout')).toEqual({ ok: null });

    expect(await run('signIn', { username: user.username, password: PASSWORD })).toEqual(refused('auth.mfa_required', 403));
    expect(await signedIn()).toBe(false);
    const wrong = code().replace(/.$/, (d) => String((Number(d) + 5) % 10));
    expect(await run('mfa.verify', { code: wrong })).toEqual(refused('auth.mfa.invalid_code', 401));
    const second = await run('mfa.verify', { recovery_code: enabled.recovery_codes[0] });
    expect(second.ok).toMatchObject({ user: { username: user.username }, session_id: expect.any(String) });
    expect(await signedIn()).toBe(true);
    const token = (await page.evaluate<string>('window.client.accessToken()')).split('.')[1]!;
    expect((JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as { amr: string[] }).amr).toEqual(['pwd', 'otp']);

    const regenerated = (await run('mfa.regenerateRecoveryCodes', { password: PASSWORD, code: code(1) })).ok as { recovery_codes: string[] };
    expect(regenerated.recovery_codes).toHaveLength(10);
    expect(await run('mfa.disable', { password: PASSWORD, code: enabled.recovery_codes[1] })).toEqual(refused('auth.mfa.invalid_code', 401));
    expect(await run('mfa.disable', { password: PASSWORD, code: regenerated.recovery_codes[0] })).toEqual({ ok: null });
    expect(await run('logout')).toEqual({ ok: null });
    expect((await run('signIn', { username: user.username, password: PASSWORD })).ok).toBeDefined();
    expect(await run('logout')).toEqual({ ok: null });
  });

  it("passkeys with Chromium's virtual authenticator: registered, listed, renamed, deleted; passkeys.signIn signs in every tab like signIn, with amr hwk and user; the browser's refusals (a second passkey on one authenticator, an unverified user) are client.passkey_* errors; a deleted passkey signs in no more", async () => {
    const user = await createUser();
    const cdp = await page.context().newCDPSession(page);
    const authenticatorId = await addVirtualAuthenticator(cdp);
    const credentials = async () => (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials;
    /** Pages to close at the end. */
    const opened: Page[] = [];
    try {
      // Signed out: the service refuses before any ceremony.
      expect(await run('passkeys.register')).toEqual(refused('auth.missing_access_token', 401));
      expect(await credentials()).toEqual([]);

      expect((await run('signIn', { username: user.username, password: PASSWORD })).ok).toBeDefined();
      const created = await run('passkeys.register', { name: 'Laptop' });
      expect(created).toEqual({ ok: { passkey: { id: expect.any(String), name: 'Laptop', created_at: expect.any(String), last_used_at: null } } });
      const passkey = (created.ok as { passkey: { id: string; created_at: string } }).passkey;
      // The authenticator holds one discoverable credential for the RP ID localhost.
      const held = await credentials();
      expect(held).toHaveLength(1);
      expect(held[0]).toMatchObject({ isResidentCredential: true, rpId: 'localhost' });
      // The same authenticator again: the browser refuses (the options exclude its credential); nothing is sent after the options.
      const before = door.auth.length;
      expect(await run('passkeys.register', { name: 'Again' })).toEqual({ error: { name: 'LatchkeyError', code: 'client.passkey_exists', message: expect.any(String), status: 0, retryAfter: null } });
      expect(door.auth.slice(before).map((r) => r.path)).toEqual(['/auth/v0/passkeys/registration/options']);
      expect(await credentials()).toHaveLength(1);

      expect(await run('passkeys.list')).toEqual({ ok: { passkeys: [passkey] } });
      expect(await run('passkeys.rename', passkey.id, 'Work laptop')).toEqual({ ok: { passkey: expect.objectContaining({ id: passkey.id, name: 'Work laptop' }) } });
      expect(await run('passkeys.rename', passkey.id, null)).toEqual({ ok: { passkey: expect.objectContaining({ id: passkey.id, name: null }) } });
      expect(await run('passkeys.rename', passkey.id, 'x'.repeat(65))).toEqual(refused('auth.passkeys.validation_failed', 400));
      expect(await run('passkeys.rename', '00000000-0000-4000-8000-000000000000', 'Nothing')).toEqual(refused('auth.passkeys.not_found', 404));
      expect(await run('logout')).toEqual({ ok: null });

      // A passkey sign-in, no username asked: this tab and the other one are signed in.
      const other = await page.context().newPage();
      opened.push(other);
      await other.goto(`${door.origin}/app/`);
      expect(await other.evaluate<boolean>('window.client.ready')).toBe(false);
      // The ceremony runs in the focused tab (WebAuthn refuses a page without focus).
      await page.bringToFront();
      // The user is not verified (a wrong PIN, a finger not recognised): the browser refuses, nothing is sent but the options.
      await cdp.send('WebAuthn.setUserVerified', { authenticatorId, isUserVerified: false });
      const unverifiedFrom = door.auth.length;
      expect(await run('passkeys.signIn')).toEqual({ error: { name: 'LatchkeyError', code: 'client.passkey_cancelled', message: expect.any(String), status: 0, retryAfter: null } });
      expect(door.auth.slice(unverifiedFrom).map((r) => r.path)).toEqual(['/auth/v0/sign-in/passkey/options']);
      expect(await signedIn()).toBe(false);
      await cdp.send('WebAuthn.setUserVerified', { authenticatorId, isUserVerified: true });
      const session = await run('passkeys.signIn');
      expect(session.ok).toMatchObject({ user: { id: user.id, username: user.username }, session_id: expect.any(String), tokens: { access_token: expect.any(String) } });
      const sessionId = (session.ok as { session_id: string }).session_id;
      expect(await signedIn()).toBe(true);
      expect(await page.evaluate<string>('window.client.sessionId')).toBe(sessionId);
      expect(await page.evaluate<unknown>("window.events.filter((e) => e.name === 'signedIn').at(-1)")).toEqual({ name: 'signedIn', sessionId });
      await expect.poll(() => other.evaluate<string | null>('window.client.sessionId')).toBe(sessionId);
      const token = (await page.evaluate<string>('window.client.accessToken()')).split('.')[1]!;
      expect((JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as { amr: string[] }).amr).toEqual(['hwk', 'user']);
      expect(await run('me')).toEqual({ ok: { user: expect.objectContaining({ username: user.username }), session_id: sessionId } });
      const used = ((await run('passkeys.list')).ok as { passkeys: { last_used_at: string | null }[] }).passkeys;
      expect(used).toHaveLength(1);
      expect(used[0]!.last_used_at).toEqual(expect.any(String));
      // The refresh cookie was set: the session survives a refresh.
      expect(await page.evaluate<boolean>('window.client.refresh()')).toBe(true);

      // Deleted: gone from the list, a second delete is 404; the authenticator keeps its credential.
      expect(await run('passkeys.delete', passkey.id)).toEqual({ ok: null });
      expect(await run('passkeys.list')).toEqual({ ok: { passkeys: [] } });
      expect(await run('passkeys.delete', passkey.id)).toEqual(refused('auth.passkeys.not_found', 404));
      expect(await run('logout')).toEqual({ ok: null });
      await expect.poll(() => other.evaluate<boolean>('window.client.signedIn')).toBe(false);
      expect(await credentials()).toHaveLength(1);
      expect(await run('passkeys.signIn')).toEqual(refused('auth.passkeys.invalid_response', 401));
      expect(await signedIn()).toBe(false);
    } finally {
      for (const tab of opened) await tab.close();
      await cdp.send('WebAuthn.removeVirtualAuthenticator', { authenticatorId });
      await cdp.detach();
    }
  });

  it("client.fetch sends the access token to the page's origin only, not to another origin", async () => {
    await run('signIn', { username: (await createUser()).username, password: PASSWORD });
    const sameOrigin = await page.evaluate<number>("window.client.fetch('/api/data').then((r) => r.status)");
    expect(sameOrigin).toBe(200);
    expect(door.api.at(-1)).toEqual({ method: 'GET', authorization: true });
    // The same server under another origin (127.0.0.1 instead of localhost): no token goes there.
    // With one, the browser would first send a CORS preflight (OPTIONS) for the header.
    const otherOrigin = door.origin.replace('localhost', '127.0.0.1');
    const before = door.api.length;
    await page.evaluate(`window.client.fetch('${otherOrigin}/api/data').catch(() => undefined)`);
    await expect.poll(() => door.api.length).toBe(before + 1);
    expect(door.api.at(-1)).toEqual({ method: 'GET', authorization: false });
  });

  it('a refresh answered 401 (the session was revoked elsewhere) signs out every tab, with the code as the reason', async () => {
    const user = await createUser();
    const context = await browser.newContext();
    try {
      const [a, b] = [await context.newPage(), await context.newPage()];
      await a.goto(`${door.origin}/app/`);
      await a.evaluate(`window.client.signIn({ username: '${user.username}', password: '${PASSWORD}' })`);
      await b.goto(`${door.origin}/app/`);
      expect(await b.evaluate<boolean>('window.client.ready')).toBe(true);
      const sessionId = await a.evaluate<string>('window.client.sessionId');
      // Another device ends this session.
      const other = await signIn(door.ctx, { username: user.username, password: PASSWORD });
      await door.ctx.app.inject({ method: 'DELETE', url: `/auth/v0/sessions/${sessionId}`, headers: { authorization: `Bearer ${other.accessToken}` } });

      expect(await a.evaluate<boolean>('window.client.refresh()')).toBe(false);
      for (const tab of [a, b]) {
        await expect.poll(() => tab.evaluate<boolean>('window.client.signedIn')).toBe(false);
        expect(await tab.evaluate<string | undefined>("window.events.filter((e) => e.name === 'signedOut').at(-1)?.reason")).toBe('auth.invalid_refresh_token');
      }
    } finally {
      await context.close();
    }
  });

  it('access tokens the service refuses (expired by its clock): three concurrent calls make one refresh, then each is sent again and succeeds; nothing is kept in storage', async () => {
    const user = await createUser();
    expect((await run('signIn', { username: user.username, password: PASSWORD })).ok).toBeDefined();
    const ttl = door.ctx.config.jwt.accessTokenTtlSeconds;
    door.ctx.clock.advance(ttl + 10);
    try {
      const from = door.auth.length;
      const answers = await page.evaluate<Outcome[]>("Promise.all([window.run('me'), window.run('me'), window.run('sessions.list')])");
      expect(answers.every((a) => a.ok !== undefined)).toBe(true);
      const seen = door.auth.slice(from).map((r) => `${r.path} ${r.status}`);
      expect(seen.filter((r) => r.startsWith('/auth/v0/refresh'))).toEqual(['/auth/v0/refresh 200']);
      expect(seen.filter((r) => r.endsWith(' 401')).sort()).toEqual(['/auth/v0/me 401', '/auth/v0/me 401', '/auth/v0/sessions 401']);
      expect(seen.filter((r) => r.endsWith(' 200')).length).toBe(4);
      // Concurrent refresh() calls of one tab share one request too.
      const before = door.auth.length;
      expect(await page.evaluate<boolean[]>('Promise.all([window.client.refresh(), window.client.refresh(), window.client.refresh()])')).toEqual([true, true, true]);
      expect(door.auth.slice(before).map((r) => r.path)).toEqual(['/auth/v0/refresh']);
    } finally {
      door.ctx.clock.advance(-(ttl + 10));
    }
    // The access token lives in memory only; the refresh token is out of the page's reach.
    expect(await page.evaluate<string>('JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage })')).toBe('{}{}');
    expect(await page.evaluate<string>('document.cookie')).toBe('');
    expect(await run('logout')).toEqual({ ok: null });
  });

  it('no answer at all (nothing listening) is client.network_error with status 0', async () => {
    const outcome = await page.evaluate(async () => {
      const g = globalThis as unknown as { createClient(o: object): { me(): Promise<unknown>; signUp(b: object): Promise<unknown> } };
      const offline = g.createClient({ baseUrl: 'http://127.0.0.1:9', restore: false });
      try {
        await offline.signUp({ username: 'nobody', email: 'nobody@example.test', password: 'whatever it is' });
        return 'resolved';
      } catch (e) {
        const err = e as { name: string; code: string; status: number };
        return `${err.name} ${err.code} ${err.status}`;
      }
    });
    expect(outcome).toBe('LatchkeyError client.network_error 0');
  });

  it('a page that is not a secure context has no WebAuthn: the passkey ceremonies throw client.passkey_unsupported before any request', async () => {
    // The same front door under a host name other than localhost: plain HTTP there is no secure context.
    const insecure = await browser.newPage();
    try {
      await insecure.goto(`${door.origin.replace('localhost', INSECURE_HOST)}/app/`);
      expect(await insecure.evaluate<boolean>('window.isSecureContext')).toBe(false);
      expect(await insecure.evaluate<boolean>('window.client.ready')).toBe(false);
      const before = door.auth.length;
      for (const op of ['passkeys.signIn', 'passkeys.register']) {
        const outcome = await insecure.evaluate(([o]) => (globalThis as unknown as { run(op: string): Promise<Outcome> }).run(o), [op] as const);
        expect(outcome, op).toEqual({ error: { name: 'LatchkeyError', code: 'client.passkey_unsupported', message: expect.any(String), status: 0, retryAfter: null } });
      }
      expect(door.auth.length).toBe(before);
    } finally {
      await insecure.close();
    }
  });
});
