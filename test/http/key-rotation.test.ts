import { createPrivateKey, createPublicKey } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { decodeProtectedHeader, importSPKI, jwtVerify, SignJWT, type JSONWebKeySet } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp, createLogger } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createPasswordHasher, type PasswordHasher } from '../../src/crypto/password.js';
import { ERROR_CATALOG, type ErrorCode } from '../../src/errors.js';
import {
  defaultKeysDir,
  wouldGitCommit,
  generateKeyFiles,
  KeyFileExistsError,
  runKeysCommand,
  writeKeyFiles,
  type GeneratedKeyFiles,
} from '../../src/modules/keys/keys.cli.js';
import { loadKeyStore, rsaKeyFileProblem } from '../../src/modules/keys/keys.service.js';
import type { MailMessage, MailTransport } from '../../src/modules/mail/mail.transport.js';
import { TestClock } from '../helpers/clock.js';
import { TEST_ARGON2 } from '../helpers/context.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { refreshCookieOf, uniqueName } from '../helpers/flows.js';

/** RFC 7638 SHA-256 thumbprint in base64url: 43 characters. */
const KID_PATTERN = /^[A-Za-z0-9_-]{43}$/;
/** ACCESS_TOKEN_TTL_SECONDS default (README "Configuration"). */
const ACCESS_TTL = 900;
/** Beyond the "few seconds" of exp leeway docs/api.md#access-token allows. */
const BEYOND_LEEWAY = 10;
const PASSWORD = 'correct horse battery staple';

const work = mkdtempSync(path.join(tmpdir(), 'auth-key-rotation-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** A fresh empty folder under the test's temporary folder. */
function freshDir(name: string): string {
  return mkdtempSync(path.join(work, `${name}-`));
}

function modeOf(file: string): number {
  return statSync(file).mode & 0o777;
}

describe('keys generate: generateKeyFiles and the CLI command', () => {
  it('writes <kid>.key.pem (0600) and <kid>.pub.pem (0644): an RSA-2048 pair the service loads under that kid', async () => {
    const outDir = path.join(freshDir('gen'), 'not', 'yet', 'there');
    const written = await generateKeyFiles({ outDir });

    expect(written.kid).toMatch(KID_PATTERN);
    expect(written.bits).toBe(2048);
    expect(written.privateKeyFile).toBe(path.join(outDir, `${written.kid}.key.pem`));
    expect(written.publicKeyFile).toBe(path.join(outDir, `${written.kid}.pub.pem`));
    expect(readdirSync(outDir).sort()).toEqual([`${written.kid}.key.pem`, `${written.kid}.pub.pem`]);
    expect(modeOf(written.privateKeyFile)).toBe(0o600);
    expect(modeOf(written.publicKeyFile)).toBe(0o644);
    expect(modeOf(outDir)).toBe(0o700);

    const privatePem = readFileSync(written.privateKeyFile, 'utf8');
    const publicPem = readFileSync(written.publicKeyFile, 'utf8');
    expect(privatePem).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    expect(publicPem).toMatch(/^-----BEGIN PUBLIC KEY-----\n/);
    const privateKey = createPrivateKey(privatePem);
    expect(privateKey.asymmetricKeyType).toBe('rsa');
    expect(privateKey.asymmetricKeyDetails?.modulusLength).toBe(2048);
    // The public file holds the public half of the private file.
    expect(createPublicKey(privateKey).export({ type: 'spki', format: 'pem' })).toBe(publicPem);

    // The service's own checks accept both files, and name the key by the printed kid.
    expect(rsaKeyFileProblem(written.privateKeyFile, 'private')).toBeUndefined();
    expect(rsaKeyFileProblem(written.publicKeyFile, 'public')).toBeUndefined();
    const store = await loadKeyStore({ privateKeyFile: written.privateKeyFile, publicKeyFiles: [written.publicKeyFile], dataDir: outDir });
    expect(store.signing.kid).toBe(written.kid);
    expect([...store.verification.keys()]).toEqual([written.kid]);
    expect((JSON.parse(store.jwksJson) as JSONWebKeySet).keys.map((k) => k.kid)).toEqual([written.kid]);

    // A signature by the private key verifies with the public file.
    const jwt = await new SignJWT({}).setProtectedHeader({ alg: 'RS256', kid: written.kid }).sign(privateKey);
    await expect(jwtVerify(jwt, await importSPKI(publicPem, 'RS256'))).resolves.toBeDefined();
  });

  it('honours bits, and refuses fewer than 2048, non-integers and more than 8192 without writing anything', async () => {
    const outDir = freshDir('bits');
    const written = await generateKeyFiles({ outDir, bits: 3072 });
    expect(written.bits).toBe(3072);
    expect(createPrivateKey(readFileSync(written.privateKeyFile)).asymmetricKeyDetails?.modulusLength).toBe(3072);

    const empty = freshDir('bits-refused');
    for (const bits of [1024, 2047, 2048.5, 8200, Number.NaN]) {
      await expect(generateKeyFiles({ outDir: empty, bits })).rejects.toThrow(RangeError);
    }
    expect(readdirSync(empty)).toEqual([]);
  });

  it('refuses to overwrite either file of a pair and leaves what exists untouched', async () => {
    const outDir = freshDir('exists');
    const first = await generateKeyFiles({ outDir });
    const privatePem = readFileSync(first.privateKeyFile, 'utf8');
    const publicPem = readFileSync(first.publicKeyFile, 'utf8');

    // The same key again: both names are taken.
    await expect(writeKeyFiles(outDir, privatePem)).rejects.toThrow(KeyFileExistsError);
    expect(readFileSync(first.privateKeyFile, 'utf8')).toBe(privatePem);
    expect(readFileSync(first.publicKeyFile, 'utf8')).toBe(publicPem);

    // Only the public file exists (someone put another file under that name): still refused,
    // and no private key is left behind.
    unlinkSync(first.privateKeyFile);
    writeFileSync(first.publicKeyFile, 'operator notes\n');
    await expect(writeKeyFiles(outDir, privatePem)).rejects.toThrow(KeyFileExistsError);
    expect(existsSync(first.privateKeyFile)).toBe(false);
    expect(readFileSync(first.publicKeyFile, 'utf8')).toBe('operator notes\n');

    // Only the private file exists: refused, the private file is not replaced.
    unlinkSync(first.publicKeyFile);
    writeFileSync(first.privateKeyFile, 'keep me\n', { mode: 0o600 });
    await expect(writeKeyFiles(outDir, privatePem)).rejects.toThrow(KeyFileExistsError);
    expect(readFileSync(first.privateKeyFile, 'utf8')).toBe('keep me\n');
    expect(existsSync(first.publicKeyFile)).toBe(false);
  });

  /** Runs `latchkey keys <argv>` in-process with the given environment, capturing its output. */
  async function keysCommand(argv: string[], env: Record<string, string> = {}) {
    let stdout = '';
    let stderr = '';
    const code = await runKeysCommand(argv, { env, stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) });
    return { code, stdout, stderr };
  }

  it('`keys generate` writes into DATA_DIR/keys (./data/keys without DATA_DIR) and prints the kid and both paths', async () => {
    const dataDir = freshDir('data');
    const run = await keysCommand(['generate'], { DATA_DIR: dataDir });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toBe('');
    const kid = /^kid\s+(\S+)$/m.exec(run.stdout)?.[1];
    expect(kid).toMatch(KID_PATTERN);
    const keysDir = path.join(dataDir, 'keys');
    expect(run.stdout).toMatch(new RegExp(`^private key\\s+${escapeRegExp(path.join(keysDir, `${kid}.key.pem`))}$`, 'm'));
    expect(run.stdout).toMatch(new RegExp(`^public key\\s+${escapeRegExp(path.join(keysDir, `${kid}.pub.pem`))}$`, 'm'));
    expect(modeOf(path.join(keysDir, `${kid}.key.pem`))).toBe(0o600);

    expect(defaultKeysDir({})).toBe(path.resolve('data', 'keys'));
    expect(defaultKeysDir({ DATA_DIR: '  ' })).toBe(path.resolve('data', 'keys'));
    expect(defaultKeysDir({ DATA_DIR: dataDir })).toBe(keysDir);
    // In this checkout the default folder is one .gitignore covers: `git add .` never takes the key.
    expect(wouldGitCommit(path.join(defaultKeysDir({}), 'k.key.pem'))).toBe(false);
    expect(wouldGitCommit(path.resolve('src', 'k.key.pem'))).toBe(true);
  });

  it('refuses a folder inside a git work tree that no ignore rule covers (exit 1, nothing written); an ignored one is fine', async () => {
    const repo = freshDir('repo');
    mkdirSync(repo, { recursive: true });
    execFileSync('git', ['init', '--quiet'], { cwd: repo });
    const tracked = path.join(repo, 'keys');
    const refused = await keysCommand(['generate', '--out', tracked]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('"git add ." would commit the private key');
    expect(existsSync(tracked)).toBe(false);
    writeFileSync(path.join(repo, '.gitignore'), 'secrets/\n');
    const ignored = await keysCommand(['generate', '--out', path.join(repo, 'secrets')]);
    expect(ignored.code, ignored.stderr).toBe(0);
    expect(readdirSync(path.join(repo, 'secrets')).filter((f) => f.endsWith('.key.pem'))).toHaveLength(1);
  });

  it('`keys generate --out DIR --bits N` (both option forms) writes there with that size', async () => {
    const outDir = freshDir('out');
    const run = await keysCommand(['generate', '--out', outDir, '--bits=3072'], { DATA_DIR: freshDir('unused') });
    expect(run.code, run.stderr).toBe(0);
    const kid = /^kid\s+(\S+)$/m.exec(run.stdout)?.[1];
    const file = path.join(outDir, `${kid}.key.pem`);
    expect(createPrivateKey(readFileSync(file)).asymmetricKeyDetails?.modulusLength).toBe(3072);
  });

  it.each([
    ['keys generate --help', ['generate', '--help']],
    ['keys generate -h', ['generate', '-h']],
    ['keys --help', ['--help']],
  ])('`%s` prints the usage and writes nothing', async (_what, argv) => {
    const dataDir = freshDir('help');
    const run = await keysCommand(argv, { DATA_DIR: dataDir });
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('Usage: latchkey keys generate [--out DIR] [--bits N]');
    expect(run.stdout).toContain('--bits N');
    expect(run.stdout).toContain('docs/key-rotation.md');
    expect(readdirSync(dataDir)).toEqual([]);
  });

  it.each([
    ['too few bits', ['generate', '--bits', '1024'], /--bits: expected an integer from 2048 to 8192/],
    ['bits that are not a number', ['generate', '--bits', '2k'], /--bits: expected an integer/],
    ['an unknown option', ['generate', '--force'], /Unknown option '--force'/],
    ['a stray argument', ['generate', 'extra'], /Usage: latchkey keys generate/],
    ['an empty --out', ['generate', '--out', ''], /--out: expected a folder/],
    ['an unknown subcommand', ['rotate'], /Unknown subcommand "rotate"/],
    ['no subcommand', [], /Missing subcommand/],
  ])('usage error (%s): exit 2 as for every command, a message on stderr, nothing written', async (_what, argv, message) => {
    const dataDir = freshDir('usage');
    const run = await keysCommand(argv, { DATA_DIR: dataDir });
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(message);
    expect(readdirSync(dataDir)).toEqual([]);
  });
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * Rotation as docs/key-rotation.md describes it, across restarts on one database:
 * A only -> publish B (sign with A) -> switch (sign with B, A retired) -> drop A.
 */
describe('signing-key rotation across restarts (JWT_PRIVATE_KEY_FILE + JWT_PUBLIC_KEY_FILES)', () => {
  let database: TestDatabase;
  let hasher: PasswordHasher;
  let keyA: GeneratedKeyFiles;
  let keyB: GeneratedKeyFiles;
  const clock = new TestClock();
  const dataDir = freshDir('rotation-data');
  /** Every email the instances sent (verification codes). */
  const mail: MailMessage[] = [];
  const transport: MailTransport = { kind: 'smtp', send: async (message) => void mail.push(message), close: () => {} };

  beforeAll(async () => {
    database = await createTestDatabase();
    hasher = await createPasswordHasher(TEST_ARGON2);
    const keysDir = freshDir('rotation-keys');
    [keyA, keyB] = await Promise.all([generateKeyFiles({ outDir: keysDir }), generateKeyFiles({ outDir: keysDir })]);
    expect(keyA.kid).not.toBe(keyB.kid);
  });
  afterAll(async () => database?.drop());

  /** Starts an instance on the shared database with the given key settings, as main.ts would (config from the environment). */
  async function startInstance(keys: { privateKey: GeneratedKeyFiles; publicKeys?: GeneratedKeyFiles[] }): Promise<FastifyInstance> {
    const config = loadConfig({
      DATA_DIR: dataDir,
      LOG_LEVEL: 'silent',
      JWT_PRIVATE_KEY_FILE: keys.privateKey.privateKeyFile,
      JWT_PUBLIC_KEY_FILES: (keys.publicKeys ?? []).map((k) => k.publicKeyFile).join(' , '),
    });
    const app = await buildApp({
      config,
      db: database.db,
      clock,
      passwordHasher: hasher,
      mailTransport: transport,
      logger: createLogger('silent'),
      startOutboxWorker: false,
    });
    await app.ready();
    return app;
  }

  /** Runs `fn` against a fresh instance and always closes it (a restart between phases). */
  async function withInstance(keys: Parameters<typeof startInstance>[0], fn: (app: FastifyInstance) => Promise<void>): Promise<void> {
    const app = await startInstance(keys);
    try {
      await fn(app);
    } finally {
      await app.close();
    }
  }

  function post(app: FastifyInstance, url: string, payload: Record<string, unknown>): Promise<LightMyRequestResponse> {
    return app.inject({ method: 'POST', url, payload, headers: { 'content-type': 'application/json' } });
  }

  function me(app: FastifyInstance, token: string): Promise<LightMyRequestResponse> {
    return app.inject({ method: 'GET', url: '/auth/v0/me', headers: { authorization: `Bearer ${token}` } });
  }

  async function jwksKids(app: FastifyInstance): Promise<string[]> {
    const res = await app.inject({ method: 'GET', url: '/auth/v0/.well-known/jwks.json' });
    expect(res.statusCode).toBe(200);
    return (res.json() as JSONWebKeySet).keys.map((k) => k.kid!);
  }

  async function signIn(app: FastifyInstance, username: string) {
    const res = await post(app, '/auth/v0/sign-in', { username, password: PASSWORD });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json() as { session_id: string; tokens: { access_token: string } };
    return { accessToken: body.tokens.access_token, refreshToken: refreshCookieOf(res).value, sessionId: body.session_id };
  }

  async function refresh(app: FastifyInstance, refreshToken: string) {
    const res = await app.inject({ method: 'POST', url: '/auth/v0/refresh', headers: { cookie: `refresh_token=${refreshToken}` } });
    expect(res.statusCode, res.body).toBe(200);
    return { accessToken: (res.json() as { tokens: { access_token: string } }).tokens.access_token, refreshToken: refreshCookieOf(res).value };
  }

  function kidOfToken(token: string): string | undefined {
    return decodeProtectedHeader(token).kid;
  }

  function expectError(res: LightMyRequestResponse, code: ErrorCode): void {
    expect(res.statusCode, res.body).toBe(ERROR_CATALOG[code].status);
    expect(res.json()).toEqual({ code, message: ERROR_CATALOG[code].message });
  }

  /** The newest verification code sent to `email`, after letting the outbox deliver. */
  async function latestCode(app: FastifyInstance, email: string): Promise<string> {
    await app.outbox.runOnce();
    const message = mail.filter((m) => m.to === email).at(-1);
    const code = message === undefined ? undefined : /verification code is (\d{6})/.exec(message.text)?.[1];
    if (code === undefined) throw new Error(`no code was sent to ${email}`);
    return code;
  }

  // State carried from phase to phase.
  const username = uniqueName('rot');
  const pendingEmail = `${uniqueName('pending')}@example.test`;
  /** Issued while only key A existed. */
  let tokenA: string;
  let sessionA: string;
  let refreshTokenA: string;
  /** Issued while A signed and B was published ahead. */
  let tokenPrepublished: string;
  /** Issued after the switch to B. */
  let tokenB: string;

  it('phase 1, key A only: tokens carry kid A; the JWKS lists A', async () => {
    await withInstance({ privateKey: keyA }, async (app) => {
      expect((await post(app, '/auth/v0/sign-up', { username, phone: '+4917012345678', password: PASSWORD })).statusCode).toBe(201);
      const s = await signIn(app, username);
      ({ accessToken: tokenA, sessionId: sessionA, refreshToken: refreshTokenA } = s);
      expect(kidOfToken(tokenA)).toBe(keyA.kid);
      expect((await me(app, tokenA)).statusCode).toBe(200);
      expect(await jwksKids(app)).toEqual([keyA.kid]);
      // An email user whose code is issued (HMAC'd) under key A and not yet used.
      const signUp = await post(app, '/auth/v0/sign-up', { username: uniqueName('pending'), email: pendingEmail, password: PASSWORD });
      expect(signUp.statusCode, signUp.body).toBe(201);
      expect(await latestCode(app, pendingEmail)).toMatch(/^\d{6}$/);
    });
  });

  it('phase 2, B published ahead (private A, public B): the JWKS lists both, tokens still carry kid A', async () => {
    await withInstance({ privateKey: keyA, publicKeys: [keyB] }, async (app) => {
      expect(new Set(await jwksKids(app))).toEqual(new Set([keyA.kid, keyB.kid]));
      tokenPrepublished = (await signIn(app, username)).accessToken;
      expect(kidOfToken(tokenPrepublished)).toBe(keyA.kid);
      expect((await me(app, tokenA)).statusCode).toBe(200);
    });
  });

  it('phase 3, switch (private B, public A): A tokens still work, new and refreshed tokens carry kid B, the JWKS lists both', async () => {
    await withInstance({ privateKey: keyB, publicKeys: [keyA] }, async (app) => {
      const old = await me(app, tokenA);
      expect(old.statusCode, old.body).toBe(200);
      expect(old.json()).toMatchObject({ session_id: sessionA, user: { username } });
      expect((await me(app, tokenPrepublished)).statusCode).toBe(200);

      const kids = await jwksKids(app);
      expect(kids).toHaveLength(2);
      expect(new Set(kids)).toEqual(new Set([keyA.kid, keyB.kid]));

      const fresh = await signIn(app, username);
      expect(kidOfToken(fresh.accessToken)).toBe(keyB.kid);
      expect((await me(app, fresh.accessToken)).statusCode).toBe(200);
      tokenB = fresh.accessToken;

      // The session from phase 1 survives the switch: its refresh token (opaque, not signed)
      // rotates as usual and the new access token is signed by B.
      const refreshed = await refresh(app, refreshTokenA);
      refreshTokenA = refreshed.refreshToken;
      expect(kidOfToken(refreshed.accessToken)).toBe(keyB.kid);
      expect((await me(app, refreshed.accessToken)).json()).toMatchObject({ session_id: sessionA });

      // docs/key-rotation.md: codes are HMAC'd with a key derived from the signing key, so a
      // code issued before the switch no longer matches; a resent code works.
      const before = mail.filter((m) => m.to === pendingEmail).length;
      const oldCode = await latestCode(app, pendingEmail);
      expectError(await post(app, '/auth/v0/verify-email', { email: pendingEmail, code: oldCode }), 'auth.verify_email.code_mismatch');
      expect((await post(app, '/auth/v0/verify-email/resend', { email: pendingEmail })).statusCode).toBe(204);
      const newCode = await latestCode(app, pendingEmail);
      expect(mail.filter((m) => m.to === pendingEmail).length).toBe(before + 1);
      expect((await post(app, '/auth/v0/verify-email', { email: pendingEmail, code: newCode })).statusCode).toBe(204);
    });
  });

  it('phase 4, A dropped (private B only): A tokens are refused 401, B tokens and the session still work', async () => {
    await withInstance({ privateKey: keyB }, async (app) => {
      expect(await jwksKids(app)).toEqual([keyB.kid]);
      expectError(await me(app, tokenA), 'auth.invalid_access_token');
      expectError(await me(app, tokenPrepublished), 'auth.invalid_access_token');
      expect((await me(app, tokenB)).statusCode).toBe(200);
      // The session of tokenA is alive: only its signature key is gone.
      const refreshed = await refresh(app, refreshTokenA);
      refreshTokenA = refreshed.refreshToken;
      expect((await me(app, refreshed.accessToken)).json()).toMatchObject({ session_id: sessionA });
    });
  });

  it('a token signed by a retired key verifies until it expires, then is refused', async () => {
    await withInstance({ privateKey: keyB, publicKeys: [keyA] }, async (app) => {
      // Re-publishing A brings tokenA back: what refused it in phase 4 was the key set alone.
      expect((await me(app, tokenA)).statusCode).toBe(200);
      clock.advance(ACCESS_TTL + BEYOND_LEEWAY);
      expectError(await me(app, tokenA), 'auth.invalid_access_token');
    });
  });
});
