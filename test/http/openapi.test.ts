/**
 * The OpenAPI document and the API reference page (docs/api.md#openapi-document): a valid
 * OpenAPI 3.1 document generated from the route schemas, with every operation of docs/api.md,
 * the operational endpoints, their tags, and exactly their status codes plus the documented extras (413 where a body is read, 429 where rate-limited,
 * 500/503 everywhere), the two security schemes and the Error schema; a reference page whose
 * scripts all come from this service; and docs/openapi.json, which must not drift from it.
 *
 * `npm run openapi` rewrites docs/openapi.json with src/openapi-files.ts, the module the last
 * test compares the copy with.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateOpenApiFiles, OPENAPI_FILE, openApiFileText } from '../../src/openapi-files.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, signIn, withBearer } from '../helpers/flows.js';

/** The repository's root, where the committed copy's path starts. */
const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Statuses every operation may answer: 500 `internal_error`, 503 `service_unavailable` (docs/api.md#status-codes). */
const ALWAYS = ['500', '503'];

/**
 * The status codes of each operation (docs/api.md#operations), with 413 on every route that
 * reads a JSON body, 429 where a rate limit applies (docs/api.md#rate-limits), and the POST form
 * of verify-email with the GET form's codes (docs/api.md#verify-email-post: same semantics).
 */
const EXPECTED: Record<string, { statuses: string[]; security?: 'bearerAuth' | 'refreshCookie' | 'mfaChallengeCookie' | 'webauthnChallengeCookie' | 'oauthFlowCookie' }> = {
  'post /auth/v0/sign-up': { statuses: ['201', '400', '409', '413', '429'] },
  'get /auth/v0/verify-email': { statuses: ['204', '400', '404', '410', '429'] },
  'post /auth/v0/verify-email': { statuses: ['204', '400', '404', '410', '413', '429'] },
  'post /auth/v0/verify-email/resend': { statuses: ['204', '400', '413', '429'] },
  'post /auth/v0/sign-in': { statuses: ['200', '400', '401', '403', '413', '429'] },
  'post /auth/v0/password-reset': { statuses: ['204', '400', '413', '429'] },
  'post /auth/v0/password-reset/confirm': { statuses: ['204', '400', '410', '413', '429'] },
  'post /auth/v0/refresh': { statuses: ['200', '401'], security: 'refreshCookie' },
  'post /auth/v0/logout': { statuses: ['204', '401'], security: 'bearerAuth' },
  'post /auth/v0/change-password': { statuses: ['204', '400', '401', '413', '429'], security: 'bearerAuth' },
  'post /auth/v0/delete-account': { statuses: ['204', '400', '401', '413', '429'], security: 'bearerAuth' },
  'post /auth/v0/sign-in/mfa': { statuses: ['200', '400', '401', '403', '413', '429'], security: 'mfaChallengeCookie' },
  'post /auth/v0/mfa/totp/setup': { statuses: ['200', '400', '401', '409', '413', '429'], security: 'bearerAuth' },
  'post /auth/v0/mfa/totp/enable': { statuses: ['200', '400', '401', '409', '413', '429'], security: 'bearerAuth' },
  'post /auth/v0/mfa/totp/disable': { statuses: ['204', '400', '401', '413', '429'], security: 'bearerAuth' },
  'post /auth/v0/mfa/recovery-codes': { statuses: ['200', '400', '401', '413', '429'], security: 'bearerAuth' },
  'post /auth/v0/sign-in/passkey/options': { statuses: ['200', '429'] },
  'post /auth/v0/sign-in/passkey': { statuses: ['200', '400', '401', '403', '413', '429'], security: 'webauthnChallengeCookie' },
  'post /auth/v0/passkeys/registration/options': { statuses: ['200', '401', '409', '429'], security: 'bearerAuth' },
  'post /auth/v0/passkeys/registration': { statuses: ['201', '400', '401', '409', '413'], security: 'bearerAuth' },
  'get /auth/v0/passkeys': { statuses: ['200', '401'], security: 'bearerAuth' },
  'patch /auth/v0/passkeys/{passkey_id}': { statuses: ['200', '400', '401', '403', '404', '413'], security: 'bearerAuth' },
  'delete /auth/v0/passkeys/{passkey_id}': { statuses: ['204', '401', '403', '404'], security: 'bearerAuth' },
  'get /auth/v0/oauth/providers': { statuses: ['200'] },
  'get /auth/v0/oauth/{provider}/authorize': { statuses: ['302', '400', '404', '429'] },
  'get /auth/v0/oauth/{provider}/callback': { statuses: ['303', '400', '404'], security: 'oauthFlowCookie' },
  'post /auth/v0/oauth/{provider}/callback': { statuses: ['303', '404', '413'] },
  'post /auth/v0/oauth/{provider}/link': { statuses: ['200', '400', '401', '404', '413', '429'], security: 'bearerAuth' },
  'get /auth/v0/identities': { statuses: ['200', '401'], security: 'bearerAuth' },
  'delete /auth/v0/identities/{identity_id}': { statuses: ['204', '401', '403', '404', '409'], security: 'bearerAuth' },
  'post /auth/v0/password': { statuses: ['204', '400', '401', '409', '413'], security: 'bearerAuth' },
  'post /auth/v0/change-email': { statuses: ['204', '400', '401', '409', '413', '429'], security: 'bearerAuth' },
  'post /auth/v0/change-email/confirm': { statuses: ['200', '400', '401', '409', '410', '413', '429'], security: 'bearerAuth' },
  'get /auth/v0/me': { statuses: ['200', '401'], security: 'bearerAuth' },
  'get /auth/v0/sessions': { statuses: ['200', '401'], security: 'bearerAuth' },
  'delete /auth/v0/sessions': { statuses: ['204', '401'], security: 'bearerAuth' },
  'delete /auth/v0/sessions/{session_id}': { statuses: ['204', '401', '403', '404'], security: 'bearerAuth' },
  'get /auth/v0/.well-known/jwks.json': { statuses: ['200'] },
  'get /healthz': { statuses: ['200'] },
  'get /readyz': { statuses: ['200'] },
  'get /metrics': { statuses: ['200'] },
  'get /auth/v0/openapi.json': { statuses: ['200'] },
};

/** The tags of the reference page in the order a user meets them, and the operations under each, in order. */
const TAG_OPERATIONS: [string, string[]][] = [
  ['Sign-up and verification', ['signUp', 'verifyEmail', 'verifyEmailWithBody', 'resendVerification']],
  ['Sign-in and tokens', ['signIn', 'signInMfa', 'passkeySignInOptions', 'signInWithPasskey', 'refresh', 'logout']],
  ['Account recovery', ['requestPasswordReset', 'confirmPasswordReset']],
  ['Sessions', ['listSessions', 'revokeAllSessions', 'revokeSession']],
  ['Account', ['getMe', 'changePassword', 'setPassword', 'changeEmail', 'confirmEmailChange', 'deleteAccount']],
  ['Second factor', ['setUpTotp', 'enableTotp', 'disableTotp', 'regenerateRecoveryCodes']],
  ['Passkeys', ['passkeyRegistrationOptions', 'registerPasskey', 'listPasskeys', 'renamePasskey', 'deletePasskey']],
  ['Identity providers', ['listIdentityProviders', 'authorizeWithProvider', 'providerCallback', 'providerCallbackFormPost', 'linkProvider', 'listIdentities', 'unlinkIdentity']],
  ['Keys', ['getJwks']],
  ['Operations', ['getLiveness', 'getReadiness', 'getMetrics', 'getOpenApiDocument']],
];

/** The response bodies of docs/api.md (User, Session, JWKS) and their components. */
const SUCCESS_BODIES: Record<string, string> = {
  'post /auth/v0/sign-in': 'SignInResponse',
  'post /auth/v0/refresh': 'RefreshResponse',
  'get /auth/v0/me': 'MeResponse',
  'get /auth/v0/sessions': 'SessionsResponse',
  'get /auth/v0/.well-known/jwks.json': 'Jwks',
};

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

let ctx: TestContext;
let document: Json;
let served: string;

beforeAll(async () => {
  ctx = await createTestContext();
  const res = await ctx.app.inject({ method: 'GET', url: '/auth/v0/openapi.json' });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
  served = res.body;
  document = JSON.parse(served) as Json;
});
afterAll(async () => ctx.close());

/** Every operation of the document as `method path` -> operation object. */
function operations(doc: Json): Map<string, Json> {
  const out = new Map<string, Json>();
  for (const [url, item] of Object.entries(doc.paths as Json)) {
    for (const [method, operation] of Object.entries(item as Json)) out.set(`${method} ${url}`, operation as Json);
  }
  return out;
}

describe('GET /auth/v0/openapi.json', () => {
  it('is a valid OpenAPI 3.1 document whose $refs all resolve', async () => {
    expect(document.openapi).toBe('3.1.0');
    expect(document.info).toMatchObject({ title: 'Latchkey', version: '0.1.0' });
    expect(document.info.description).toMatch(/^[^\n]{20,200}$/);
    const validator = new Validator();
    const result = await validator.validate(structuredClone(document));
    expect(result.errors, JSON.stringify(result.errors, null, 2)).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
    // Every $ref points at an existing component.
    const refs = served.match(/"\$ref": ?"[^"]+"/g) ?? [];
    expect(refs.length).toBeGreaterThan(0);
    for (const ref of refs) {
      const target = /#\/components\/schemas\/([A-Za-z]+)/.exec(ref)?.[1];
      expect(target, ref).toBeDefined();
      expect(document.components.schemas[target!], ref).toBeDefined();
    }
  });

  it('has every operation of docs/api.md, no other, each with exactly its status codes', () => {
    const ops = operations(document);
    expect([...ops.keys()].sort()).toEqual(Object.keys(EXPECTED).sort());
    for (const [key, expected] of Object.entries(EXPECTED)) {
      const statuses = Object.keys(ops.get(key)!.responses as Json).sort();
      expect(statuses, key).toEqual([...expected.statuses, ...ALWAYS].sort());
    }
  });

  it('leaves out the reference page and the demo page', () => {
    const paths = Object.keys(document.paths as Json);
    for (const hidden of ['/auth/v0/docs', '/auth/v0/demo']) {
      expect(paths.some((p) => p.startsWith(hidden)), hidden).toBe(false);
    }
  });

  it('declares the tags with descriptions in the order a user meets them, and files every operation under one, in that order', () => {
    expect((document.tags as Json[]).map((t) => t.name)).toEqual(TAG_OPERATIONS.map(([name]) => name));
    for (const tag of document.tags as Json[]) expect(tag.description, tag.name).toMatch(/^\S.{10,}\.$/);
    // Operations in document order; Swagger UI lists each tag's operations in this order.
    const inOrder = [...operations(document).values()];
    for (const operation of inOrder) expect(operation.tags, operation.operationId).toHaveLength(1);
    const grouped = TAG_OPERATIONS.map(([name]) => [name, inOrder.filter((o) => o.tags[0] === name).map((o) => o.operationId)]);
    expect(grouped).toEqual(TAG_OPERATIONS);
    expect(inOrder.map((o) => o.operationId)).toEqual(TAG_OPERATIONS.flatMap(([, ids]) => ids));
  });

  it('declares bearerAuth (JWT) and the refresh_token, mfa_challenge, webauthn_challenge and oauth_flow cookies and uses them on exactly the right operations', () => {
    expect(document.components.securitySchemes).toEqual({
      bearerAuth: expect.objectContaining({ type: 'http', scheme: 'bearer', bearerFormat: 'JWT' }),
      refreshCookie: expect.objectContaining({ type: 'apiKey', in: 'cookie', name: 'refresh_token' }),
      mfaChallengeCookie: expect.objectContaining({ type: 'apiKey', in: 'cookie', name: 'mfa_challenge' }),
      webauthnChallengeCookie: expect.objectContaining({ type: 'apiKey', in: 'cookie', name: 'webauthn_challenge' }),
      oauthFlowCookie: expect.objectContaining({ type: 'apiKey', in: 'cookie', name: 'oauth_flow' }),
    });
    expect(document.security).toBeUndefined();
    for (const [key, operation] of operations(document)) {
      const expected = EXPECTED[key]!.security;
      expect(operation.security, key).toEqual(expected === undefined ? undefined : [{ [expected]: [] }]);
    }
  });

  it('has the Error schema (docs/api.md#error-body), and every error response is an Error', () => {
    expect(document.components.schemas.Error).toEqual({
      title: 'Error',
      type: 'object',
      additionalProperties: false,
      required: ['code', 'message'],
      properties: { code: expect.objectContaining({ type: 'string' }), message: { type: 'string' } },
    });
    for (const [key, operation] of operations(document)) {
      for (const [status, response] of Object.entries(operation.responses as Json)) {
        expect(typeof response.description, `${key} ${status}`).toBe('string');
        if (Number(status) < 400) continue;
        expect(response.content, `${key} ${status}`).toEqual({ 'application/json': { schema: { $ref: '#/components/schemas/Error' } } });
      }
      if (operation.responses['429'] !== undefined) expect(operation.responses['429'].headers['Retry-After'], key).toBeDefined();
    }
  });

  it('names the wire shapes as components and refers to them', () => {
    const schemas = document.components.schemas as Json;
    for (const name of ['User', 'Session', 'Error', 'SignUpRequest', 'SignInRequest', 'ChangePasswordRequest', 'SignInResponse', 'RefreshResponse', 'MeResponse', 'SessionsResponse', 'Jwks']) {
      expect(schemas[name], name).toBeDefined();
    }
    expect(Object.keys(schemas.User.properties).sort()).toEqual(['email', 'id', 'is_email_verified', 'is_phone_verified', 'phone', 'username']);
    expect(schemas.User.additionalProperties).toBe(false);
    expect(Object.keys(schemas.Session.properties).sort()).toEqual(['created_at', 'current', 'device_id', 'expires_at', 'id', 'ip', 'last_used_at', 'user_agent']);
    expect(schemas.SessionsResponse.properties.sessions.items).toEqual({ $ref: '#/components/schemas/Session' });
    expect(schemas.SignInResponse.properties.user).toEqual({ $ref: '#/components/schemas/User' });
    const ops = operations(document);
    for (const [key, name] of Object.entries(SUCCESS_BODIES)) {
      const success = Object.entries(ops.get(key)!.responses as Json).find(([s]) => s.startsWith('2'))![1] as Json;
      expect(success.content['application/json'].schema, key).toEqual({ $ref: `#/components/schemas/${name}` });
    }
    expect(ops.get('post /auth/v0/sign-up')!.requestBody.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/SignUpRequest' });
    // The GET form of verify-email documents its query parameters (docs/api.md#verify-email-get).
    const query = (ops.get('get /auth/v0/verify-email')!.parameters as Json[]).map((p) => [p.in, p.name, p.required]);
    expect(query.sort()).toEqual([['query', 'code', true], ['query', 'email', true]]);
  });

  it('matches what the service answers: a sign-in and a sessions list have exactly the documented members', async () => {
    const user = await createVerifiedUser(ctx);
    const s = await signIn(ctx, { username: user.username, password: user.password });
    const schemas = document.components.schemas as Json;
    expect(Object.keys(s.res.json()).sort()).toEqual([...(schemas.SignInResponse.required as string[])].sort());
    const list = await withBearer(ctx, 'GET', '/auth/v0/sessions', s.accessToken);
    expect(Object.keys(list.json().sessions[0]).sort()).toEqual([...(schemas.Session.required as string[])].sort());
  });

  it('docs/openapi.json is the served document, as `npm run openapi` writes it (run it after changing a route)', async () => {
    const generated = (await generateOpenApiFiles(ctx.db)).find((f) => f.path === OPENAPI_FILE)!;
    // What the script writes is what this service serves.
    expect(generated.text).toBe(openApiFileText(document));
    const committed = readFileSync(path.join(ROOT, OPENAPI_FILE), 'utf8');
    expect(JSON.parse(committed), 'docs/openapi.json is stale: run `npm run openapi`').toEqual(document);
    expect(committed, 'docs/openapi.json is stale: run `npm run openapi`').toBe(generated.text);
  });
});

describe('GET /auth/v0/docs (API reference page)', () => {
  it('is an HTML page whose scripts and styles are all served by this service (works offline)', async () => {
    const page = await ctx.app.inject({ method: 'GET', url: '/auth/v0/docs' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    const assets = [...page.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(assets.some((a) => a.endsWith('swagger-ui-bundle.js'))).toBe(true);
    for (const asset of assets) {
      expect(asset, 'no CDN: every asset is a local path').toMatch(/^\/auth\/v0\/docs\//);
      const res = await ctx.app.inject({ method: 'GET', url: asset });
      expect(res.statusCode, asset).toBe(200);
      expect(res.body.length, asset).toBeGreaterThan(0);
    }
    // The bundle itself fetches nothing from a CDN at start, and the validator badge is off.
    const init = await ctx.app.inject({ method: 'GET', url: '/auth/v0/docs/static/swagger-initializer.js' });
    expect(init.statusCode).toBe(200);
    expect(init.body).toContain('validatorUrl: null');
    expect(init.body).toContain("url: resolveUrl('./json')");
  });

  it('loads the same document the service serves at openapi.json', async () => {
    const res = await ctx.app.inject({ method: 'GET', url: '/auth/v0/docs/json' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual(document);
  });
});
