import type { LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import type { TestContext } from './context.js';
import { createVerifiedUser, PASSWORD, setCookies, signIn, withBearer } from './flows.js';
import { SoftwareAuthenticator, type CeremonyOverrides } from './webauthn.js';

/** PublicKeyCredentialCreationOptionsJSON as the service answers it (the members the tests read). */
export interface CreationOptions {
  challenge: string;
  rp: { id: string; name: string };
  user: { id: string; name: string; displayName: string };
  excludeCredentials: { id: string }[];
  authenticatorSelection: Record<string, unknown>;
}

/** POST /passkeys/registration/options as `token`. */
export async function registrationOptions(c: TestContext, token: string): Promise<CreationOptions> {
  const res = await withBearer(c, 'POST', '/auth/v0/passkeys/registration/options', token);
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as CreationOptions;
}

/** Registers a new credential of `authenticator` for `token`'s user; returns the response. */
export async function register(
  c: TestContext,
  token: string,
  authenticator: SoftwareAuthenticator,
  o: { name?: string | null; overrides?: CeremonyOverrides } = {},
): Promise<LightMyRequestResponse> {
  const options = await registrationOptions(c, token);
  const response = authenticator.create(options, o.overrides);
  return withBearer(c, 'POST', '/auth/v0/passkeys/registration', token, { response, ...(o.name === undefined ? {} : { name: o.name }) });
}

/** A verified, signed-in user with one passkey (named `Laptop`) on a software authenticator. */
export async function withPasskey(c: TestContext) {
  const user = await createVerifiedUser(c);
  const session = await signIn(c, { username: user.username, password: PASSWORD });
  const authenticator = new SoftwareAuthenticator();
  const res = await register(c, session.accessToken, authenticator, { name: 'Laptop' });
  expect(res.statusCode, res.body).toBe(201);
  const passkey = (res.json() as { passkey: { id: string } }).passkey;
  return { user, session, authenticator, passkey };
}

/** POST /sign-in/passkey/options: the options and the `webauthn_challenge` cookie's value. */
export async function signInOptions(c: TestContext): Promise<{ options: { challenge: string; rpId: string }; cookie: string; res: LightMyRequestResponse }> {
  const res = await c.app.inject({ method: 'POST', url: '/auth/v0/sign-in/passkey/options' });
  expect(res.statusCode, res.body).toBe(200);
  const cookie = setCookies(res).find((x) => x.name === 'webauthn_challenge');
  expect(cookie).toBeDefined();
  return { options: res.json() as { challenge: string; rpId: string }, cookie: cookie!.value, res };
}

/** POST /sign-in/passkey with `response` and the challenge cookie (none when undefined). */
export function postAssertion(c: TestContext, cookie: string | undefined, response: unknown): Promise<LightMyRequestResponse> {
  return c.app.inject({
    method: 'POST',
    url: '/auth/v0/sign-in/passkey',
    headers: { 'content-type': 'application/json', ...(cookie === undefined ? {} : { cookie: `webauthn_challenge=${cookie}` }) },
    payload: JSON.stringify({ response }),
  });
}

/** A whole passkey sign-in: options, an assertion of `authenticator` (with `overrides`), the sign-in request. */
export async function passkeySignIn(
  c: TestContext,
  authenticator: SoftwareAuthenticator,
  o: { credentialId?: string; overrides?: CeremonyOverrides } = {},
): Promise<{ res: LightMyRequestResponse; cookie: string; response: unknown }> {
  const { options, cookie } = await signInOptions(c);
  const response = authenticator.get(options, o.credentialId, o.overrides);
  return { res: await postAssertion(c, cookie, response), cookie, response };
}
