import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, PASSWORD, signIn } from '../helpers/flows.js';
import { passkeySignIn, register, withPasskey } from '../helpers/passkeys.js';
import { SoftwareAuthenticator } from '../helpers/webauthn.js';

/**
 * A passkey ceremony from a page whose origin is not in WEBAUTHN_ORIGINS (docs/api.md#passkeys):
 * the most common setup mistake (the service on another port than the configured origin's, an
 * app on its own dev-server port). The answer says which origin the browser signed and which are
 * allowed, at registration (400) and at sign-in (401), instead of a generic "does not verify".
 */
const ALLOWED = ['http://localhost:3000', 'http://localhost:5173'];
let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestContext({ WEBAUTHN_ORIGINS: ALLOWED.join(',') }, { startOutboxWorker: false });
});
afterAll(async () => ctx.close());

describe('a ceremony from an origin not in WEBAUTHN_ORIGINS', () => {
  it('registration: 400 auth.passkeys.validation_failed naming the origin that came and the allowed ones; nothing stored', async () => {
    const user = await createVerifiedUser(ctx);
    const session = await signIn(ctx, { username: user.username, password: PASSWORD });
    const res = await register(ctx, session.accessToken, new SoftwareAuthenticator(), { overrides: { origin: 'http://localhost:3100' } });
    expect(res.statusCode, res.body).toBe(400);
    const body = res.json() as { code: string; message: string };
    expect(body.code).toBe('auth.passkeys.validation_failed');
    expect(body.message).toContain('"http://localhost:3100"');
    for (const origin of ALLOWED) expect(body.message).toContain(origin);
    expect(body.message).toContain('WEBAUTHN_ORIGINS');
    const { rows } = await ctx.db.query('SELECT 1 FROM passkeys WHERE user_id = $1', [user.id]);
    expect(rows).toHaveLength(0);
  });

  it('sign-in: 401 auth.passkeys.invalid_response naming the origin that came and the allowed ones; no session', async () => {
    const { authenticator } = await withPasskey(ctx);
    const { res } = await passkeySignIn(ctx, authenticator, { overrides: { origin: 'https://app.example.com' } });
    expect(res.statusCode, res.body).toBe(401);
    const body = res.json() as { code: string; message: string };
    expect(body.code).toBe('auth.passkeys.invalid_response');
    expect(body.message).toContain('"https://app.example.com"');
    for (const origin of ALLOWED) expect(body.message).toContain(origin);
    expect(res.headers['set-cookie']?.toString() ?? '').not.toContain('refresh_token=');
  });

  it('an origin of the list verifies as before (both listed origins register)', async () => {
    const user = await createVerifiedUser(ctx);
    const session = await signIn(ctx, { username: user.username, password: PASSWORD });
    for (const origin of ALLOWED) {
      const res = await register(ctx, session.accessToken, new SoftwareAuthenticator({ origin, rpId: 'localhost' }));
      expect(res.statusCode, res.body).toBe(201);
    }
  });

  it('an origin too long to repeat whole is cut short in the message', async () => {
    const user = await createVerifiedUser(ctx);
    const session = await signIn(ctx, { username: user.username, password: PASSWORD });
    const origin = `https://${'a'.repeat(2000)}.example`;
    const res = await register(ctx, session.accessToken, new SoftwareAuthenticator(), { overrides: { origin } });
    expect(res.statusCode).toBe(400);
    const message = (res.json() as { message: string }).message;
    expect(message.length).toBeLessThan(400);
    expect(message).toContain('https://aaaa');
    expect(message).not.toContain(origin);
  });

  it('an origin with quotes, a line break or a control character is repeated as a JSON string: it cannot end the quotation or add a line', async () => {
    const user = await createVerifiedUser(ctx);
    const session = await signIn(ctx, { username: user.username, password: PASSWORD });
    const origin = 'https://evil.example" is allowed.\nIMPORTANT\u0085: "x';
    const res = await register(ctx, session.accessToken, new SoftwareAuthenticator(), { overrides: { origin } });
    expect(res.statusCode).toBe(400);
    const message = (res.json() as { message: string }).message;
    expect(message).toContain('"https://evil.example\\" is allowed.\\nIMPORTANT\\u0085: \\"x"');
    expect(message).not.toMatch(/[\n\u0085]/);
  });
});
