import { request as httpRequest } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, PASSWORD, signIn, withBearer } from '../helpers/flows.js';
import { registrationOptions, signInOptions, withPasskey } from '../helpers/passkeys.js';
import { SoftwareAuthenticator } from '../helpers/webauthn.js';

/**
 * The writes a passkey caller can cause are bounded (docs/api.md#passkeys): registration options
 * are rate-limited per user and keep only a few live challenges per user, and a passkey sign-in
 * whose client address is unknown counts against the unknown client, as every other path does.
 */
let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext({ RATE_LIMIT_SIGN_IN_PER_IDENTIFIER: '10' }, { startOutboxWorker: false });
});
afterAll(async () => ctx?.close());

async function liveRegistrationChallenges(userId: string): Promise<number> {
  const { rows } = await ctx.db.query<{ n: number }>("SELECT count(*)::int AS n FROM webauthn_challenges WHERE purpose = 'registration' AND user_id = $1", [userId]);
  return rows[0]!.n;
}

describe('passkey registration options are bounded', () => {
  it('300 calls with one token store at most 3 challenges, and calls past the per-user limit are refused with Retry-After', async () => {
    const user = await createVerifiedUser(ctx);
    const { accessToken } = await signIn(ctx, { username: user.username, password: PASSWORD });
    const statuses: number[] = [];
    for (let i = 0; i < 300; i++) {
      const res = await withBearer(ctx, 'POST', '/auth/v0/passkeys/registration/options', accessToken);
      statuses.push(res.statusCode);
      if (res.statusCode === 429) {
        expect(res.json()).toMatchObject({ code: 'auth.passkeys.too_many_attempts' });
        expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
      }
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(20);
    expect(statuses.slice(20).every((s) => s === 429)).toBe(true);
    expect(await liveRegistrationChallenges(user.id)).toBe(3);
  });

  it('a new challenge replaces the oldest: the three newest register, an older one is refused', async () => {
    const user = await createVerifiedUser(ctx);
    const { accessToken } = await signIn(ctx, { username: user.username, password: PASSWORD });
    const options = [];
    for (let i = 0; i < 4; i++) {
      options.push(await registrationOptions(ctx, accessToken));
      ctx.clock.advance(1);
    }
    expect(await liveRegistrationChallenges(user.id)).toBe(3);
    const authenticator = new SoftwareAuthenticator();
    const oldest = await withBearer(ctx, 'POST', '/auth/v0/passkeys/registration', accessToken, { response: authenticator.create(options[0]!) });
    expect(oldest.statusCode, oldest.body).toBe(400);
    const newest = await withBearer(ctx, 'POST', '/auth/v0/passkeys/registration', accessToken, { response: authenticator.create(options[3]!) });
    expect(newest.statusCode, newest.body).toBe(201);
  });
});

describe('a passkey sign-in without a client address', () => {
  it('counts against the unknown client: over a Unix socket, the attempts past RATE_LIMIT_SIGN_IN_PER_IP answer 429', async () => {
    const c = await createTestContext({ RATE_LIMIT_SIGN_IN_PER_IP: '2' }, { startOutboxWorker: false });
    const dir = mkdtempSync(path.join(tmpdir(), 'latchkey-socket-'));
    const socketPath = path.join(dir, 'service.sock');
    try {
      const { authenticator } = await withPasskey(c);
      const { options } = await signInOptions(c);
      const response = authenticator.get(options);
      await c.app.listen({ path: socketPath });
      const post = (): Promise<{ status: number; body: string }> =>
        new Promise((resolve, reject) => {
          const body = JSON.stringify({ response });
          const req = httpRequest(
            { socketPath, method: 'POST', path: '/auth/v0/sign-in/passkey', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), cookie: 'webauthn_challenge=not-a-live-challenge' } },
            (res) => {
              let text = '';
              res.setEncoding('utf8');
              res.on('data', (chunk: string) => (text += chunk));
              res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
            },
          );
          req.on('error', reject);
          req.end(body);
        });
      const answers = [await post(), await post(), await post()];
      expect(answers.map((a) => a.status)).toEqual([401, 401, 429]);
      expect(JSON.parse(answers[2]!.body)).toMatchObject({ code: 'auth.sign_in.too_many_attempts' });
    } finally {
      await c.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
