import type { LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import type { TestContext } from './context.js';
import { createVerifiedUser, PASSWORD, postJson, setCookies, signIn, withBearer } from './flows.js';
import { stepAt, totpForStep } from './totp.js';

/** The code for the test clock's current step, or `offset` steps away. */
export const codeNow = (c: TestContext, secret: string, offset = 0): string => totpForStep(secret, stepAt(c.clock.now()) + offset);
/** Moves the test clock to the next 30 s step, so a fresh code is not a replay of the last one. */
export const nextStep = (c: TestContext): void => c.clock.advance(30);

/** A verified, signed-in user with TOTP enabled; returns its secret and recovery codes. The clock moves to the next step. */
export async function enrolled(c: TestContext) {
  const user = await createVerifiedUser(c);
  const session = await signIn(c, { username: user.username, password: PASSWORD });
  const setup = await withBearer(c, 'POST', '/auth/v0/mfa/totp/setup', session.accessToken, { password: PASSWORD });
  expect(setup.statusCode, setup.body).toBe(200);
  const { secret } = setup.json() as { secret: string };
  const enable = await withBearer(c, 'POST', '/auth/v0/mfa/totp/enable', session.accessToken, { code: codeNow(c, secret) });
  expect(enable.statusCode, enable.body).toBe(200);
  nextStep(c);
  return { user, session, secret, recoveryCodes: (enable.json() as { recovery_codes: string[] }).recovery_codes };
}

/** The password step of an enrolled user: 403 and the challenge cookie's value. */
export async function passwordStep(c: TestContext, username: string, password = PASSWORD): Promise<string> {
  const res = await postJson(c, '/auth/v0/sign-in', { username, password });
  expect(res.statusCode, res.body).toBe(403);
  expect(res.json()).toMatchObject({ code: 'auth.mfa_required' });
  const cookie = setCookies(res).find((x) => x.name === 'mfa_challenge');
  expect(cookie).toBeDefined();
  return cookie!.value;
}

export function secondStep(c: TestContext, challenge: string | undefined, body: unknown): Promise<LightMyRequestResponse> {
  return c.app.inject({
    method: 'POST',
    url: '/auth/v0/sign-in/mfa',
    headers: { 'content-type': 'application/json', ...(challenge === undefined ? {} : { cookie: `mfa_challenge=${challenge}` }) },
    payload: JSON.stringify(body),
  });
}

