/**
 * 400 validation messages in plain words (docs/errors.md): a message names the field and its
 * rule ("username must be 3 to 32 letters, digits or underscores"), never Ajv's text (a pattern,
 * "must NOT have additional properties", a keyword name), and the Error body and codes are the
 * same as ever. The rules come from the request schemas (`withRule`, src/errors.ts); fields
 * without one get a message built from the failed keyword ("username must be a string").
 *
 * Two parts: exact messages for the cases a client meets most, and a sweep driven by the
 * OpenAPI document: for every field of every request body and query, a value of the wrong type
 * and a value breaking each of its constraints, and the field left out, all answer a message
 * that names the field and has no jargon.
 */
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH } from '../../src/plugins/body-parsers.js';
import { createTestContext, type TestContext } from '../helpers/context.js';
import { createVerifiedUser, keysOf, PASSWORD, signIn } from '../helpers/flows.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** What a plain-words message never contains: Ajv's wording, keywords, JSON Pointers, regular expressions. */
const JARGON = [/must match pattern/i, /must NOT/, /additionalProperties/i, /additional properties/i, /\^/, /\$/, /anyOf/i, /#\//, /schema/i, /must have required property/i, /instancePath/i, /\bformat\b/i];

/** The validation code of each operation that validates a body or query. */
const VALIDATION_CODES: Record<string, string> = {
  signUp: 'auth.sign_up.validation_failed',
  signIn: 'auth.sign_in.validation_failed',
  verifyEmail: 'auth.verify_email.validation_failed',
  verifyEmailWithBody: 'auth.verify_email.validation_failed',
  resendVerification: 'auth.resend_verification.validation_failed',
  changePassword: 'auth.change_password.validation_failed',
};
/** Operations whose body is one of several objects (not swept field by field below), with their validation code. */
const UNION_BODY_CODES: Record<string, string> = { signInMfa: 'auth.mfa.validation_failed' };

let ctx: TestContext;
let document: Json;
let bearer: string;

beforeAll(async () => {
  ctx = await createTestContext();
  document = (await ctx.app.inject({ method: 'GET', url: '/auth/v0/openapi.json' })).json() as Json;
  const user = await createVerifiedUser(ctx);
  bearer = (await signIn(ctx, { username: user.username, password: PASSWORD })).accessToken;
});
afterAll(async () => ctx.close());

/** The operation with this operationId: method, path and object. */
function operation(operationId: string): { method: string; path: string; op: Json } {
  for (const [path, item] of Object.entries(document.paths as Json)) {
    for (const [method, op] of Object.entries(item as Json)) if ((op as Json).operationId === operationId) return { method, path, op: op as Json };
  }
  throw new Error(`no operation ${operationId}`);
}

/** Sends a body (any JSON value, or raw text) or a query to an operation, with a Bearer token where it needs one. */
function send(operationId: string, input: { body?: unknown; raw?: string; query?: Record<string, string> }): Promise<LightMyRequestResponse> {
  const { method, path, op } = operation(operationId);
  const query = input.query === undefined ? '' : `?${new URLSearchParams(input.query).toString()}`;
  const hasBody = 'body' in input || input.raw !== undefined;
  return ctx.app.inject({
    method: method.toUpperCase() as 'POST',
    url: `${path}${query}`,
    headers: {
      ...(hasBody ? { 'content-type': 'application/json' } : {}),
      ...(op.security?.[0]?.bearerAuth === undefined ? {} : { authorization: `Bearer ${bearer}` }),
    },
    ...(hasBody ? { payload: input.raw ?? JSON.stringify(input.body) } : {}),
  });
}

/** Asserts a 400 `{code, message}` with the operation's validation code, and returns the message. */
function messageOf(res: LightMyRequestResponse, operationId: string): string {
  expect(res.statusCode, res.body).toBe(400);
  const body = res.json() as Json;
  expect(keysOf(body)).toEqual(['code', 'message']);
  expect(body.code).toBe(VALIDATION_CODES[operationId] ?? UNION_BODY_CODES[operationId]);
  const message = body.message as string;
  for (const jargon of JARGON) expect(message, `${operationId}: ${message}`).not.toMatch(jargon);
  return message;
}

describe('validation messages name the field and its rule in plain words', () => {
  const valid = {
    signUp: { username: 'alice', email: 'alice@example.com', password: PASSWORD },
    signIn: { username: 'alice', password: PASSWORD },
    changePassword: { current_password: PASSWORD, new_password: 'plum tractor velvet harbour' },
    verifyEmail: { email: 'alice@example.com', code: '123456' },
  };

  it.each([
    ['signUp', { ...valid.signUp, username: 'al' }, 'username must be 3 to 32 letters, digits or underscores'],
    ['signUp', { ...valid.signUp, username: 'alice smith' }, 'username must be 3 to 32 letters, digits or underscores'],
    ['signUp', { ...valid.signUp, username: 42 }, 'username must be a string'],
    ['signUp', { ...valid.signUp, password: 12345678 }, 'password must be a string'],
    ['signUp', { ...valid.signUp, password: null }, 'password must be a string'],
    ['verifyEmailWithBody', { ...valid.verifyEmail, code: 123456 }, 'code must be a string'],
    ['signUp', { ...valid.signUp, email: 'alice' }, 'email must be an email address of at most 320 characters'],
    ['signUp', { ...valid.signUp, password: 'short' }, 'password must be 8 to 72 characters'],
    ['signUp', { ...valid.signUp, phone: 'call me' }, 'phone must be a phone number: 8 to 24 digits, spaces, hyphens or parentheses, after an optional +'],
    ['signUp', { ...valid.signUp, foo: 1 }, 'unknown member "foo"'],
    ['signUp', { username: 'alice', password: PASSWORD }, 'email or phone is required'],
    ['signUp', { email: 'alice@example.com', password: PASSWORD }, 'username is required'],
    ['signUp', [], 'body must be a JSON object'],
    ['signUp', null, 'body must be a JSON object'],
    ['signUp', 'alice', 'body must be a JSON object'],
    ['signIn', { password: PASSWORD }, 'username, email or phone is required'],
    ['signIn', { ...valid.signIn, username: 42 }, 'username must be a string'],
    ['signIn', { email: 'alice', password: PASSWORD }, 'email must be an email address'],
    ['signIn', { username: 'alice' }, 'password is required'],
    ['signIn', { ...valid.signIn, remember_me: true }, 'unknown member "remember_me"'],
    ['changePassword', { ...valid.changePassword, new_password: 'short' }, 'new_password must be 8 to 72 characters'],
    ['changePassword', { ...valid.changePassword, current_password: 12345678 }, 'current_password must be a string'],
    ['changePassword', { new_password: 'plum tractor velvet harbour' }, 'current_password is required'],
    ['verifyEmailWithBody', { ...valid.verifyEmail, code: '12345' }, 'code must be the 6 digits of the code in the email'],
    ['verifyEmailWithBody', { ...valid.verifyEmail, email: 'alice@' }, 'email must be an email address of at most 320 characters'],
    ['resendVerification', {}, 'email is required'],
  ] as const)('%s %j: %s', async (operationId, body, expected) => {
    expect(messageOf(await send(operationId, { body }), operationId)).toBe(expected);
  });

  it('the second sign-in step takes a code or a recovery code: both at once is "exactly one of code and recovery_code", whatever their values; neither names both', async () => {
    const both = 'body must have exactly one of code and recovery_code';
    for (const body of [
      { code: '123456', recovery_code: 'qs7kd-4bn2a' },
      { recovery_code: 'qs7kd-4bn2a', code: '123456' },
      { code: 'abc', recovery_code: 'qs7kd-4bn2a' },
      { code: '123456', recovery_code: '' },
    ]) {
      expect(messageOf(await send('signInMfa', { body }), 'signInMfa'), JSON.stringify(body)).toBe(both);
    }
    expect(messageOf(await send('signInMfa', { body: {} }), 'signInMfa')).toBe('code or recovery_code is required');
    // One alternative with a bad value, or with a member of its own that is unknown, is told so as before.
    expect(messageOf(await send('signInMfa', { body: { code: 'abc' } }), 'signInMfa')).toBe('code must be the 6 digits the authenticator app shows');
    expect(messageOf(await send('signInMfa', { body: { code: '123456', foo: 1 } }), 'signInMfa')).toBe('unknown member "foo"');
  });

  it('the query of GET /verify-email: each field and its rule', async () => {
    expect(messageOf(await send('verifyEmail', { query: { ...valid.verifyEmail, code: 'abcdef' } }), 'verifyEmail')).toBe('code must be the 6 digits of the code in the email');
    expect(messageOf(await send('verifyEmail', { query: { ...valid.verifyEmail, email: 'nope' } }), 'verifyEmail')).toBe('email must be an email address of at most 320 characters');
    expect(messageOf(await send('verifyEmail', { query: { email: 'alice@example.com' } }), 'verifyEmail')).toBe('code is required');
  });

  it('a missing, empty or malformed JSON body: "body must be a JSON object" or "body must be valid JSON"', async () => {
    expect(messageOf(await send('signUp', { raw: '' }), 'signUp')).toBe('body must be a JSON object');
    expect(messageOf(await send('signIn', { raw: '{"username": "alice",' }), 'signIn')).toBe('body must be valid JSON');
  });

  it('valid JSON that is refused before the schema says why: a prototype-poisoning member, or nesting too deep', async () => {
    const poisoning = 'body must not have a member named "__proto__", nor a "constructor" member with a "prototype"';
    expect(messageOf(await send('signIn', { raw: '{"__proto__": {"x": 1}, "password": "p"}' }), 'signIn')).toBe(poisoning);
    expect(messageOf(await send('signIn', { raw: '{"constructor": {"prototype": {}}, "password": "p"}' }), 'signIn')).toBe(poisoning);
    const nested = (levels: number) => `{"username": "alice", "password": "p", "x": ${'['.repeat(levels - 1)}${']'.repeat(levels - 1)}}`;
    const tooDeep = `body must not nest objects and arrays more than ${MAX_JSON_DEPTH} levels deep`;
    // 8,000 levels fit the body limit and exhaust the call stack of a recursive walk.
    for (const levels of [MAX_JSON_DEPTH + 1, 8_000]) expect(messageOf(await send('signIn', { raw: nested(levels) }), 'signIn')).toBe(tooDeep);
    expect(messageOf(await send('signIn', { raw: `[${nested(MAX_JSON_DEPTH)}]` }), 'signIn')).toBe(tooDeep);
    // At the limit the body reaches the schema, which names the unknown member.
    expect(messageOf(await send('signIn', { raw: nested(MAX_JSON_DEPTH) }), 'signIn')).toBe('unknown member "x"');
  });

  it('an unknown member with a long name is named in part, the message stays short', async () => {
    const name = 'x'.repeat(5000);
    const message = messageOf(await send('signUp', { body: { ...valid.signUp, [name]: 1 } }), 'signUp');
    expect(message).toBe(`unknown member "${'x'.repeat(40)}…"`);
  });

  it('never repeats the value sent', async () => {
    const secret = 'hunter2 is my password!';
    for (const [operationId, body] of [
      ['signUp', { ...valid.signUp, username: secret }],
      ['signUp', { ...valid.signUp, email: secret }],
      ['verifyEmailWithBody', { ...valid.verifyEmail, code: secret }],
    ] as const) {
      expect(messageOf(await send(operationId, { body }), operationId)).not.toContain(secret);
    }
  });
});

/** `schema` with `$ref`s to components resolved. */
function resolve(schema: Json): Json {
  const name = /^#\/components\/schemas\/(.+)$/.exec(String(schema.$ref ?? ''))?.[1];
  return name === undefined ? schema : (document.components.schemas[name] as Json);
}

/** Values breaking each constraint of a string field, and one of the wrong type. */
function invalidValues(schema: Json): [string, unknown][] {
  const out: [string, unknown][] = [['a number', 12345678], ['an object', { a: 1 }], ['null', null]];
  if (schema.type !== 'string') return out;
  if (typeof schema.minLength === 'number' && schema.minLength > 0) out.push([`shorter than ${schema.minLength as number}`, 'a'.repeat(schema.minLength - 1)]);
  if (typeof schema.maxLength === 'number') out.push([`longer than ${schema.maxLength as number}`, `${'a'.repeat(schema.maxLength)}1@example.com`]);
  if (typeof schema.pattern === 'string') out.push(['against its pattern', '!?!?!?!?!?']);
  if (schema.format === 'email') out.push(['not an email address', 'alice.example.com']);
  return out;
}

describe('every field of every validated body and query: an invalid value answers a message naming the field, without jargon', () => {
  // Each case starts from the operation's documented example (a valid request) and breaks one field.
  it.each(Object.keys(VALIDATION_CODES))('%s', async (operationId) => {
    const { op } = operation(operationId);
    const json = op.requestBody?.content?.['application/json'] as Json | undefined;
    let fields: [string, Json, boolean][];
    let base: Record<string, unknown>;
    let sendWith: (input: Record<string, unknown>) => Promise<LightMyRequestResponse>;
    if (json !== undefined) {
      const schema = resolve(json.schema as Json);
      fields = Object.entries(schema.properties as Json).map(([name, s]) => [name, s as Json, ((schema.required ?? []) as string[]).includes(name)]);
      base = (json.example ?? Object.values(json.examples as Json)[0].value) as Record<string, unknown>;
      sendWith = (body) => send(operationId, { body });
    } else {
      const query = (op.parameters as Json[]).filter((p) => p.in === 'query');
      fields = query.map((p) => [p.name as string, p.schema as Json, p.required === true]);
      base = Object.fromEntries(query.map((p) => [p.name, p.example]));
      // A query carries strings only: the other values are sent as their JSON text (none of which is valid).
      sendWith = (input) => send(operationId, { query: Object.fromEntries(Object.entries(input).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)])) });
    }
    expect(fields.length, operationId).toBeGreaterThan(0);
    let checked = 0;
    for (const [field, schema, required] of fields) {
      for (const [what, value] of invalidValues(schema)) {
        const message = messageOf(await sendWith({ ...base, [field]: value }), operationId);
        expect(message, `${operationId} ${field} ${what}`).toMatch(new RegExp(`^${field} `));
        checked++;
      }
      if (required) {
        const { [field]: _left, ...rest } = base;
        const message = messageOf(await sendWith(rest), operationId);
        expect(message, `${operationId} without ${field}`).toMatch(new RegExp(`\\b${field}\\b.* is required$`));
        checked++;
      }
    }
    expect(checked, operationId).toBeGreaterThan(fields.length);
  });
});
