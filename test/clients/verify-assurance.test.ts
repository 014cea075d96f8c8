/**
 * `assuranceLevel` of @latchkey/verify: whether a session signed in with two factors (NIST SP
 * 800-63B-4 AAL2), read from the token's `amr` (RFC 8176). Checked on real tokens of a real
 * service for each sign-in method it has (password, password + TOTP, password + recovery code,
 * passkey), verified by the package itself, and on the exact `amr` lists the service issues.
 */
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assuranceLevel, createVerifier, type Verifier } from '../../packages/verify/src/index.js';
import { PASSKEY_AMR } from '../../src/modules/passkeys/passkeys.service.js';
import { OTP_AMR, PASSWORD_AMR, provesTwoFactors } from '../../src/modules/sign-in/sign-in.service.js';
import { OAUTH_AMR } from '../../src/modules/oauth/oauth.service.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, signIn } from '../helpers/flows.js';
import { codeNow, enrolled, passwordStep, secondStep } from '../helpers/mfa.js';
import { passkeySignIn, withPasskey } from '../helpers/passkeys.js';

describe('assuranceLevel: did the session use two factors (from amr)', () => {
  let ctx: TestContext;
  let verifier: Verifier;

  beforeAll(async () => {
    ctx = await createTestContext();
    await ctx.app.listen({ host: '127.0.0.1', port: 0 });
    const origin = `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}`;
    verifier = createVerifier({ jwksUrl: `${origin}/auth/v0/.well-known/jwks.json`, issuer: ctx.config.jwt.issuer, audience: ctx.config.jwt.audience });
  });
  afterAll(async () => ctx?.close());

  /** The access token of a sign-in answer (200). */
  const tokenOf = (res: { statusCode: number; body: string; json(): unknown }): string => {
    expect(res.statusCode, res.body).toBe(200);
    return (res.json() as { tokens: { access_token: string } }).tokens.access_token;
  };

  it('password alone: aal1; password + TOTP: aal2; password + recovery code: aal2; passkey (user-verified): aal2 — on real tokens of each sign-in method', async () => {
    const password = await createVerifiedUser(ctx);
    const pwd = await verifier.verify((await signIn(ctx, { username: password.username, password: password.password })).accessToken);
    expect(pwd.amr).toEqual(['pwd']);
    expect(assuranceLevel(pwd)).toBe('aal1');
    expect(assuranceLevel(pwd.claims)).toBe('aal1');

    const { user, secret, recoveryCodes } = await enrolled(ctx);
    const totp = await verifier.verify(tokenOf(await secondStep(ctx, await passwordStep(ctx, user.username), { code: codeNow(ctx, secret) })));
    expect(totp.amr).toEqual(['pwd', 'otp']);
    expect(assuranceLevel(totp)).toBe('aal2');
    expect(assuranceLevel(totp.claims)).toBe('aal2');

    const recovery = await verifier.verify(tokenOf(await secondStep(ctx, await passwordStep(ctx, user.username), { recovery_code: recoveryCodes[0] })));
    expect(recovery.amr).toEqual(['pwd', 'otp']);
    expect(assuranceLevel(recovery)).toBe('aal2');

    const { authenticator } = await withPasskey(ctx);
    const passkey = await verifier.verify(tokenOf((await passkeySignIn(ctx, authenticator)).res));
    expect(passkey.amr).toEqual(['hwk', 'user']);
    expect(assuranceLevel(passkey)).toBe('aal2');
    expect(assuranceLevel(passkey.claims)).toBe('aal2');
  });

  it("the service's own amr lists: pwd aal1; pwd+otp and hwk+user aal2, in any order", () => {
    expect(assuranceLevel({ amr: PASSWORD_AMR })).toBe('aal1');
    expect(assuranceLevel({ amr: PASSKEY_AMR })).toBe('aal2');
    expect(assuranceLevel({ amr: ['pwd', 'otp'] })).toBe('aal2');
    expect(assuranceLevel({ amr: ['otp', 'pwd'] })).toBe('aal2');
    expect(assuranceLevel({ amr: ['user', 'hwk'] })).toBe('aal2');
  });

  it("the service's own rule for skipping the second step agrees with it on every amr a sign-in can reach finishSignIn with", () => {
    // Every first step's amr, and each with the second step's `otp` added.
    const firstSteps = [PASSWORD_AMR, PASSKEY_AMR, OAUTH_AMR];
    for (const amr of firstSteps) expect(provesTwoFactors(amr), JSON.stringify(amr)).toBe(assuranceLevel({ amr }) === 'aal2');
    for (const amr of [PASSWORD_AMR].map((a) => [...a, OTP_AMR])) expect(provesTwoFactors(amr), JSON.stringify(amr)).toBe(assuranceLevel({ amr }) === 'aal2');
    // `oauth` is no RFC 8176 factor, so the package answers aal1 for oauth+otp; the service still
    // needs no third step: the user's own second factor was given (docs/decisions.md).
    expect(provesTwoFactors([...OAUTH_AMR, OTP_AMR])).toBe(true);
    expect(provesTwoFactors([OTP_AMR])).toBe(false);
    expect(provesTwoFactors(['hwk'])).toBe(false);
  });

  it('fails closed: no amr, an empty or malformed one, one factor twice, or user presence without a key is aal1', () => {
    for (const amr of [undefined, null, [], 'pwd otp', ['pwd', 42], [{}], ['otp'], ['hwk'], ['user'], ['pwd', 'pwd'], ['pwd', 'user'], ['pwd', 'kba'], ['otp', 'sms']]) {
      expect(assuranceLevel({ amr }), JSON.stringify(amr)).toBe('aal1');
    }
    expect(assuranceLevel({})).toBe('aal1');
  });

  it('other RFC 8176 lists of two factor kinds, or "mfa", are aal2', () => {
    for (const amr of [['mfa'], ['pwd', 'hwk'], ['pin', 'swk'], ['fpt', 'hwk'], ['pwd', 'sms'], ['swk', 'user'], ['face', 'pwd']]) {
      expect(assuranceLevel({ amr }), JSON.stringify(amr)).toBe('aal2');
    }
  });
});
