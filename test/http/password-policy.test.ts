import { randomBytes, randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, createLogger } from '../../src/app.js';
import { createPasswordHasher, type PasswordHasher } from '../../src/crypto/password.js';
import { checkPassword, SERVICE_NAME } from '../../src/modules/users/password-policy.js';
import { createSignInSession } from '../../src/modules/sessions/sessions.repo.js';
import { replacePasswordHash, setPasswordHash, upgradePasswordHash } from '../../src/modules/users/users.repo.js';
import { createTestContext, TEST_ARGON2, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, keysOf, PASSWORD, postJson, setCookies, signIn, uniqueName, withBearer } from '../helpers/flows.js';
import { codeNow, enrolled, passwordStep, secondStep } from '../helpers/mfa.js';

let ctx: TestContext;
beforeAll(async () => {
  // This file sends many sign-ups and sign-ins from one address; the rate limits have their own tests.
  ctx = await createTestContext({ RATE_LIMIT_SIGN_UP_PER_IP: '0', RATE_LIMIT_SIGN_IN_PER_IP: '0', RATE_LIMIT_SIGN_IN_PER_IDENTIFIER: '0' });
});
afterAll(async () => ctx.close());

const TOO_COMMON = /^password is too common/;
const HAS_USERNAME = /^password must not contain the username/;
const HAS_EMAIL = /^password must not contain the part of the email address before the @/;
const HAS_SERVICE_NAME = /^password must not contain the name of the service/;
/** The "too easy to guess" message of a password mostly made of one kind of pattern. */
const mostly = (kind: string): RegExp => new RegExp(`^password is too easy to guess: it is mostly ${kind}\\. Add more words or random characters\\.$`);
const KEYBOARD = mostly('a keyboard pattern');
const REPEATS = mostly('repeated characters');
const SEQUENCE = mostly('a sequence of letters, digits or words in order');
const DATE = mostly('a date or a year');
const WORDS = mostly('common words or passwords');
const WORDS_AND_DATE = mostly('common words or passwords and a date or a year');
const L33T = mostly('common words with letters swapped for look-alike digits or symbols');
const REVERSED = mostly('common words written backwards');

/**
 * Random 8-character passwords (printable ASCII from node:crypto), with no pattern zxcvbn finds:
 * the shortest passwords the contract allows must be reachable.
 */
const RANDOM_EIGHT = ['Qz7#mK2$', 'v9&Lr4!x', 'T3k%pW8z', 'b7*Hq2#N', 'H6r^Nz0t', 'xkqmtbvr'];

/** A fresh username and an email whose local part differs from it, so each rule is tested on its own. */
function freshAccount(): { username: string; email: string; local: string } {
  const username = uniqueName('pp');
  const local = `jane.doe.${randomBytes(3).toString('hex')}`;
  return { username, email: `${local}+news@example.test`, local };
}

/** Asserts a 400 with the given code whose message matches `reason`. */
function expectRefused(res: LightMyRequestResponse, code: string, reason: RegExp): void {
  expect(res.statusCode, res.body).toBe(400);
  expect(keysOf(res.json())).toEqual(['code', 'message']);
  expect(res.json().code).toBe(code);
  expect(res.json().message).toMatch(reason);
}

/** The m (KiB) and t of a stored argon2id PHC string. */
function costOf(phc: string): { m: number; t: number } {
  const match = /^\$argon2id\$v=19\$m=(\d+),t=(\d+),p=\d+\$/.exec(phc);
  if (match === null) throw new Error(`not an argon2id PHC string: ${phc}`);
  return { m: Number(match[1]), t: Number(match[2]) };
}

async function storedHash(userId: string): Promise<string> {
  const { rows } = await ctx.db.query<{ password_hash: string }>('SELECT password_hash FROM users WHERE id = $1', [userId]);
  return rows[0]!.password_hash;
}

describe('sign-up password policy (NIST SP 800-63B-4 §3.1.1.2)', () => {
  it.each([
    ['the username', (a: ReturnType<typeof freshAccount>) => a.username, HAS_USERNAME],
    ['the username capitalised with a year', (a: ReturnType<typeof freshAccount>) => `${a.username.toUpperCase()}2024`, HAS_USERNAME],
    ['the username with its separator dropped', (a: ReturnType<typeof freshAccount>) => `my ${a.username.replace('_', '')}!`, HAS_USERNAME],
    ["the email's local part", (a: ReturnType<typeof freshAccount>) => `${a.local}!!`, HAS_EMAIL],
    ["the email's mailbox name with separators dropped", (a: ReturnType<typeof freshAccount>) => `Jane Doe ${a.local.slice('jane.doe.'.length)}`, HAS_EMAIL],
    ['the service name: latchkey2024!', () => 'latchkey2024!', HAS_SERVICE_NAME],
    ['the service name in capitals: LATCHKEY99', () => 'LATCHKEY99', HAS_SERVICE_NAME],
    ['password123', () => 'password123', TOO_COMMON],
    ['12345678', () => '12345678', TOO_COMMON],
    ['qwertyuiop', () => 'qwertyuiop', TOO_COMMON],
    ['a decorated common password: P@ssw0rd!', () => 'P@ssw0rd!', TOO_COMMON],
    ['a decorated common password: iloveyou!', () => 'iloveyou!', TOO_COMMON],
    ['a decorated common password: P@ssw0rd1', () => 'P@ssw0rd1', TOO_COMMON],
    ['a common word plus digits: monkey123', () => 'monkey123', TOO_COMMON],
    ['a keyboard walk on the common list: qwertyui', () => 'qwertyui', TOO_COMMON],
    ['a keyboard walk on the common list: 1qaz2wsx', () => '1qaz2wsx', TOO_COMMON],
    ['a keyboard walk: poiuytre', () => 'poiuytre', KEYBOARD],
    ['a keyboard walk: lkjhgfds', () => 'lkjhgfds', KEYBOARD],
    ['a repeated character: aaaaaaaa', () => 'aaaaaaaa', REPEATS],
    ['a repeated character: aaaaaaaaaaaa', () => 'aaaaaaaaaaaa', REPEATS],
    ['a repeated pair: xyxyxyxy', () => 'xyxyxyxy', REPEATS],
    ['a sequence: abcdefgh', () => 'abcdefgh', SEQUENCE],
    ['a backward sequence: hgfedcba', () => 'hgfedcba', SEQUENCE],
    ['a date: 19901231', () => '19901231', DATE],
    ['a date with dots: 31.12.1990', () => '31.12.1990', DATE],
    ['a common word with a year and a symbol: dragon2024!', () => 'dragon2024!', WORDS_AND_DATE],
    ['a short common word with a year and a symbol: Love2024!', () => 'Love2024!', WORDS_AND_DATE],
    ['two common words run together: correcthorse', () => 'correcthorse', WORDS],
    ['two common words run together: mondaytuesday', () => 'mondaytuesday', WORDS],
    ['common words in l33t: c0rr3cth0rs3', () => 'c0rr3cth0rs3', L33T],
    ['common words reversed: yeknomnogard', () => 'yeknomnogard', REVERSED],
  ])('400 auth.sign_up.validation_failed for %s, saying why, and nothing is stored', async (_what, makePassword, reason) => {
    const account = freshAccount();
    const password = makePassword(account);
    const res = await postJson(ctx, '/auth/v0/sign-up', { username: account.username, email: account.email, password });
    expectRefused(res, 'auth.sign_up.validation_failed', reason);
    expect(res.json().message.toLowerCase()).not.toContain(password.toLowerCase());
    const { rows } = await ctx.db.query('SELECT 1 FROM users WHERE username = $1', [account.username]);
    expect(rows).toHaveLength(0);
  });

  it.each([
    ['a passphrase', 'correct horse battery staple'],
    ['a passphrase with capitals and digits', 'Purple Tuesday Lighthouse 42'],
    ['a random 12-character string', randomBytes(9).toString('base64url')],
  ])('201 for %s', async (_what, password) => {
    const account = freshAccount();
    const res = await postJson(ctx, '/auth/v0/sign-up', { username: account.username, email: account.email, password });
    expect(res.statusCode, res.body).toBe(201);
  });

  it.each(RANDOM_EIGHT)("201 for the random 8-character password %s: the contract's minimum is reachable", async (password) => {
    const account = freshAccount();
    const res = await postJson(ctx, '/auth/v0/sign-up', { username: account.username, email: account.email, password });
    expect(res.statusCode, res.body).toBe(201);
    // The password was stored as given: sign-in gets past it (403 comes only after the right password).
    const signInRes = await postJson(ctx, '/auth/v0/sign-in', { username: account.username, password });
    expect(signInRes.json().code, signInRes.body).toBe('auth.email_not_verified');
  });

  it('checks the username case-insensitively although sign-up lower-cases it', async () => {
    const username = uniqueName('Mixed');
    const res = await postJson(ctx, '/auth/v0/sign-up', { username, phone: '+4915199990000', password: `${username} rocks` });
    expectRefused(res, 'auth.sign_up.validation_failed', HAS_USERNAME);
  });
});

describe('change-password applies the same policy', () => {
  it.each([
    ['the username', (u: { username: string; email: string }) => `${u.username}!`, HAS_USERNAME],
    ["the email's local part", (u: { username: string; email: string }) => `${u.email.split('@')[0]!}?!`, HAS_EMAIL],
    ['the service name', () => 'Latchkey forever', HAS_SERVICE_NAME],
    ['password123', () => 'password123', TOO_COMMON],
  ])('400 auth.change_password.validation_failed for %s, and nothing changes', async (_what, makePassword, reason) => {
    const account = freshAccount();
    const user = await createVerifiedUser(ctx, { username: account.username, email: account.email });
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const before = await storedHash(user.id);
    const res = await withBearer(ctx, 'POST', '/auth/v0/change-password', s.accessToken, { current_password: user.password, new_password: makePassword(user) });
    expectRefused(res, 'auth.change_password.validation_failed', reason);
    expect(res.headers['set-cookie']).toBeUndefined();
    expect(await storedHash(user.id)).toBe(before);
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', s.accessToken)).statusCode).toBe(200);
  });

  it('204 for a random 8-character password', async () => {
    const user = await createVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const res = await withBearer(ctx, 'POST', '/auth/v0/change-password', s.accessToken, { current_password: user.password, new_password: 'Qz7#mK2$' });
    expect(res.statusCode, res.body).toBe(204);
    await signIn(ctx, { username: user.username, password: 'Qz7#mK2$' });
  });

  it('204 for a passphrase', async () => {
    const user = await createVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const res = await withBearer(ctx, 'POST', '/auth/v0/change-password', s.accessToken, { current_password: user.password, new_password: 'Purple Tuesday Lighthouse 42' });
    expect(res.statusCode, res.body).toBe(204);
  });
});

describe('checkPassword', () => {
  const context = { username: 'correcthorse', email: 'alice.smith@example.test', serviceName: SERVICE_NAME };

  it.each([
    ['the username', 'correcthorse2024'],
    ['the username in l33t', 'c0rr3cth0rs3 Xk9#mQ'],
    ['the username reversed', 'esrohtcerroc!Xk9#'],
    ['the email local part with other separators', 'Alice_Smith_1990'],
    ['the service name in l33t', 'MyL4tchK3y1'],
    ['the service name reversed', 'yekhctal2024'],
  ])('refuses %s as a context word', async (_what, password) => {
    expect((await checkPassword(password, context))?.rule).toMatch(/^(username|email|service_name)$/);
  });

  it('ignores an email local part shorter than 3 characters', async () => {
    expect(await checkPassword('Purple Tuesday Lighthouse al', { username: 'someone', email: 'al@example.test', serviceName: SERVICE_NAME })).toBeUndefined();
  });

  it('accepts passphrases and the passwords the other suites use', async () => {
    for (const password of [
      'correct horse battery staple',
      'a long enough password',
      'a brand new password 42',
      'a completely different passphrase',
      'Hygiene passphrase pw_0123456789',
    ]) {
      expect(await checkPassword(password, { username: 'user_0123456789', email: 'user_0123456789@example.test', serviceName: SERVICE_NAME }), password).toBeUndefined();
    }
  });

  it('accepts random 12-character strings', async () => {
    for (let i = 0; i < 200; i++) {
      const password = randomBytes(9).toString('base64');
      expect(await checkPassword(password, context), password).toBeUndefined();
    }
  });

  it('a check of a 72-character password stays well within a request budget (median under 100 ms)', async () => {
    await checkPassword('warm-up passphrase', context); // the first call builds the dictionaries
    const times: number[] = [];
    for (let i = 0; i < 21; i++) {
      const password = randomBytes(54).toString('base64'); // 72 characters, many l33t-prone ones
      // The check's CPU time (it does no I/O): unlike the wall time, it does not grow while other
      // processes on a busy machine hold the cores.
      const start = process.cpuUsage();
      await checkPassword(password, context);
      const used = process.cpuUsage(start);
      times.push((used.user + used.system) / 1000);
    }
    times.sort((a, b) => a - b);
    expect(times[10]!).toBeLessThan(100);
  });
});

describe('PasswordHasher.needsRehash', () => {
  const CONFIGURED = { memoryCost: 512, timeCost: 2, parallelism: 2 };
  /** Unpadded base64 salt (16 bytes) and hash (32 bytes), as a PHC string carries them. */
  const saltAndHash = `${Buffer.alloc(16, 1).toString('base64').replace(/=+$/, '')}$${Buffer.alloc(32, 2).toString('base64').replace(/=+$/, '')}`;
  let hasher: PasswordHasher;
  beforeAll(async () => {
    hasher = await createPasswordHasher(CONFIGURED);
  });
  const phc = (algorithm: string, params: string, version = 19): string => `$${algorithm}$v=${version}$${params}$${saltAndHash}`;

  it('false for a hash it just made, and for equal or higher parameters', async () => {
    expect(hasher.needsRehash(await hasher.hash('correct horse battery staple'))).toBe(false);
    expect(hasher.needsRehash(phc('argon2id', 'm=512,t=2,p=2'))).toBe(false);
    expect(hasher.needsRehash(phc('argon2id', 'm=1024,t=3,p=4'))).toBe(false);
    expect(hasher.needsRehash(phc('argon2id', 't=2,p=2,m=512'))).toBe(false);
  });

  it.each([
    ['a lower m', phc('argon2id', 'm=256,t=2,p=2')],
    ['a lower t', phc('argon2id', 'm=512,t=1,p=2')],
    ['a lower p', phc('argon2id', 'm=512,t=2,p=1')],
    ['argon2i', phc('argon2i', 'm=512,t=2,p=2')],
    ['argon2d', phc('argon2d', 'm=512,t=2,p=2')],
    ['argon2 version 1.0', phc('argon2id', 'm=512,t=2,p=2', 16)],
    ['a missing parameter', phc('argon2id', 'm=512,t=2')],
    ['a non-numeric parameter', phc('argon2id', 'm=lots,t=2,p=2')],
    ['a missing version', `$argon2id$m=512,t=2,p=2$${saltAndHash}`],
    ['a bcrypt hash', '$2b$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW'],
    ['an empty string', ''],
    ['a PHC string without hash', `$argon2id$v=19$m=512,t=2,p=2$${saltAndHash.split('$')[0]!}`],
  ])('true for %s', (_what, stored) => {
    expect(hasher.needsRehash(stored)).toBe(true);
  });
});

describe('argon2id hash upgrade at sign-in', () => {
  /** A second instance of the service on the same database and key, hashing with `params`. */
  async function instanceWith(params: { memoryCost: number; timeCost: number; parallelism: number }) {
    const app = await buildApp({
      config: ctx.config,
      db: ctx.db,
      clock: ctx.clock,
      passwordHasher: await createPasswordHasher(params),
      logger: createLogger('silent'),
      startOutboxWorker: false,
    });
    await app.ready();
    return app;
  }

  it('sign-in re-hashes a stored password whose argon2id parameters are below the configured ones', async () => {
    const user = await createVerifiedUser(ctx);
    expect(costOf(await storedHash(user.id))).toEqual({ m: TEST_ARGON2.memoryCost, t: TEST_ARGON2.timeCost });

    const raised = { memoryCost: TEST_ARGON2.memoryCost * 2, timeCost: TEST_ARGON2.timeCost + 1, parallelism: TEST_ARGON2.parallelism };
    const app = await instanceWith(raised);
    try {
      const res = await app.inject({ method: 'POST', url: '/auth/v0/sign-in', payload: { username: user.username, password: user.password } });
      expect(res.statusCode, res.body).toBe(200);
      // Polled, so an upgrade stored just after the answer passes too.
      await expect.poll(async () => costOf(await storedHash(user.id)), { timeout: 2000 }).toEqual({ m: raised.memoryCost, t: raised.timeCost });
    } finally {
      await app.close();
    }
    // Same password, stronger hash: sign-in still works, and no session was revoked by the upgrade.
    const again = await signIn(ctx, { username: user.username, password: user.password });
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', again.accessToken)).statusCode).toBe(200);
  });

  it('upgradePasswordHash stores the new hash only over the expected one and revokes nothing', async () => {
    const user = await createVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const old = await storedHash(user.id);
    const stronger = await createPasswordHasher({ memoryCost: TEST_ARGON2.memoryCost * 2, timeCost: TEST_ARGON2.timeCost + 1, parallelism: 1 });
    expect(stronger.needsRehash(old)).toBe(true);
    const newHash = await stronger.hash(user.password);
    expect(await upgradePasswordHash(ctx.db, user.id, { expectedHash: old, newHash }, ctx.clock.now())).toBe(true);
    expect(await storedHash(user.id)).toBe(newHash);
    expect(stronger.needsRehash(newHash)).toBe(false);
    // A second upgrade from the same (now stale) hash loses, as after a parallel password change.
    expect(await upgradePasswordHash(ctx.db, user.id, { expectedHash: old, newHash: await stronger.hash(user.password) }, ctx.clock.now())).toBe(false);
    expect(await storedHash(user.id)).toBe(newHash);
    expect((await withBearer(ctx, 'GET', '/auth/v0/me', s.accessToken)).statusCode).toBe(200);
    await signIn(ctx, { username: user.username, password: user.password });
  });

  it('a user with a second factor gets the upgrade too, at the password step, and the challenge still completes', async () => {
    const { user, secret } = await enrolled(ctx);
    const raised = { memoryCost: TEST_ARGON2.memoryCost * 2, timeCost: TEST_ARGON2.timeCost + 1, parallelism: TEST_ARGON2.parallelism };
    const app = await instanceWith(raised);
    let challenge: string;
    try {
      const res = await app.inject({ method: 'POST', url: '/auth/v0/sign-in', payload: { username: user.username, password: PASSWORD } });
      expect(res.statusCode, res.body).toBe(403);
      challenge = setCookies(res).find((c) => c.name === 'mfa_challenge')!.value;
      await expect.poll(async () => costOf(await storedHash(user.id)), { timeout: 2000 }).toEqual({ m: raised.memoryCost, t: raised.timeCost });
    } finally {
      await app.close();
    }
    // The challenge of the step that upgraded the hash still completes: an upgrade is no password change.
    const done = await secondStep(ctx, challenge, { code: codeNow(ctx, secret) });
    expect(done.statusCode, done.body).toBe(200);
  });

  it('a session started while a parallel upgrade replaced the hash is still created (password step checked before the upgrade)', async () => {
    const { user, secret } = await enrolled(ctx);
    const challenge = await passwordStep(ctx, user.username);
    // A parallel sign-in's background upgrade lands between the two steps (as it could between a
    // passkey sign-in's read of the user and its session).
    const stronger = await createPasswordHasher({ memoryCost: TEST_ARGON2.memoryCost * 2, timeCost: TEST_ARGON2.timeCost + 1, parallelism: 1 });
    const old = await storedHash(user.id);
    expect(await upgradePasswordHash(ctx.db, user.id, { expectedHash: old, newHash: await stronger.hash(PASSWORD) }, ctx.clock.now())).toBe(true);
    const done = await secondStep(ctx, challenge, { code: codeNow(ctx, secret) });
    expect(done.statusCode, done.body).toBe(200);
    // A password change between the two steps still ends the challenge.
    const second = await passwordStep(ctx, user.username);
    const s = await signIn(ctx, { username: user.username, password: PASSWORD }).catch(() => undefined);
    expect(s).toBeUndefined(); // the second factor is on: no session from the password alone
    const token = (done.json() as { tokens: { access_token: string } }).tokens.access_token;
    const changed = await withBearer(ctx, 'POST', '/auth/v0/change-password', token, { current_password: PASSWORD, new_password: 'plum tractor velvet harbour' });
    expect(changed.statusCode, changed.body).toBe(204);
    ctx.clock.advance(30);
    const refused = await secondStep(ctx, second, { code: codeNow(ctx, secret) });
    expect(refused.statusCode, refused.body).toBe(401);
  });

  it('createSignInSession checks the password version: a re-hash of the same password lets it through, a reset does not', async () => {
    const user = await createVerifiedUser(ctx);
    const version = async (): Promise<number> =>
      (await ctx.db.query<{ password_version: number }>('SELECT password_version FROM users WHERE id = $1', [user.id])).rows[0]!.password_version;
    const checked = await version();
    // What a passkey sign-in or a second step does with the version it read, after a parallel upgrade.
    const stronger = await createPasswordHasher({ memoryCost: TEST_ARGON2.memoryCost * 2, timeCost: TEST_ARGON2.timeCost + 1, parallelism: 1 });
    expect(await upgradePasswordHash(ctx.db, user.id, { expectedHash: await storedHash(user.id), newHash: await stronger.hash(user.password) }, ctx.clock.now())).toBe(true);
    expect(await version()).toBe(checked);
    const session = (id: string) => ({
      sessionId: id,
      deviceId: randomUUID(),
      userId: user.id,
      checkedPasswordVersion: checked,
      ip: null,
      userAgent: null,
      now: ctx.clock.now(),
      expiresAt: new Date(ctx.clock.now().getTime() + 3_600_000),
      refreshToken: { id: randomUUID(), tokenHash: randomBytes(32).toString('hex') },
      forgiveRateLimitKeys: [],
      amr: ['hwk', 'user'],
    });
    expect(await createSignInSession(ctx.db, session(randomUUID()))).toBe(true);
    // A reset (or change) raises the version: a session checked against the old one is not created.
    expect(await setPasswordHash(ctx.db, user.id, await stronger.hash('plum tractor velvet harbour'), ctx.clock.now())).toBe(true);
    expect(await version()).toBe(checked + 1);
    expect(await createSignInSession(ctx.db, session(randomUUID()))).toBe(false);
  });

  it('the database keeps the version rule: a hash replaced without marking a re-hash (an instance of the previous version changing a password) raises the version', async () => {
    const user = await createVerifiedUser(ctx);
    const version = async (): Promise<number> =>
      (await ctx.db.query<{ password_version: number }>('SELECT password_version FROM users WHERE id = $1', [user.id])).rows[0]!.password_version;
    const before = await version();
    const stronger = await createPasswordHasher({ memoryCost: TEST_ARGON2.memoryCost * 2, timeCost: TEST_ARGON2.timeCost + 1, parallelism: 1 });
    // The previous version's change: the hash alone.
    await ctx.db.query('UPDATE users SET password_hash = $2 WHERE id = $1', [user.id, await stronger.hash('plum tractor velvet harbour')]);
    expect(await version()).toBe(before + 1);
    // This version's change raises it itself, once.
    expect(await replacePasswordHash(ctx.db, user.id, { expectedVersion: before + 1, newHash: await stronger.hash('quince lantern orbit meadow') }, ctx.clock.now())).toBe(true);
    expect(await version()).toBe(before + 2);
    // A re-hash leaves it.
    expect(await upgradePasswordHash(ctx.db, user.id, { expectedHash: await storedHash(user.id), newHash: await stronger.hash('quince lantern orbit meadow') }, ctx.clock.now())).toBe(true);
    expect(await version()).toBe(before + 2);
    // Other updates of the row leave it too.
    await ctx.db.query('UPDATE users SET updated_at = now() WHERE id = $1', [user.id]);
    expect(await version()).toBe(before + 2);
  });

  it('sign-in leaves a hash alone whose parameters meet the configured ones', async () => {
    const user = await createVerifiedUser(ctx);
    const before = await storedHash(user.id);
    const app = await instanceWith({ ...TEST_ARGON2 });
    try {
      const res = await app.inject({ method: 'POST', url: '/auth/v0/sign-in', payload: { username: user.username, password: user.password } });
      expect(res.statusCode, res.body).toBe(200);
    } finally {
      await app.close();
    }
    expect(await storedHash(user.id)).toBe(before);
  });
});
