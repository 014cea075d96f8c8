import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { expect } from 'vitest';
import { normalizePassword } from '../../src/crypto/password.js';
import { normalizeEmail, normalizeUsername } from '../../src/modules/users/identifiers.js';
import { insertUser } from '../../src/modules/users/users.repo.js';
import { codeFrom, type ReceivedMail } from './smtp.js';
import { testPasswordHasher, type TestContext } from './context.js';

/** A username, unique per call, that matches the sign-up pattern. */
export function uniqueName(prefix = 'user'): string {
  return `${prefix}_${randomBytes(5).toString('hex')}`;
}

export const PASSWORD = 'correct horse battery staple';

/** POST /auth/v0/sign-up with a JSON body. */
export function postJson(ctx: TestContext, url: string, body: unknown, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return ctx.app.inject({ method: 'POST', url, payload: body as Record<string, unknown>, headers: { 'content-type': 'application/json', ...headers } });
}

/** Signs up a user with a fresh username and email (overridable). */
export async function signUp(ctx: TestContext, overrides: Record<string, unknown> = {}) {
  const username = uniqueName();
  const body = { username, email: `${username}@example.test`, password: PASSWORD, ...overrides };
  const res = await postJson(ctx, '/auth/v0/sign-up', body);
  return { res, body: res.json() as { user: { id: string; username: string; email: string | null } }, request: body };
}

/**
 * Runs the outbox until a message to `email` has arrived at the SMTP server, and returns the
 * code of the newest one.
 */
export async function latestCode(ctx: TestContext, email: string, minMessages = 1): Promise<string> {
  for (let i = 0; i < 100; i++) {
    await ctx.app.outbox.runOnce();
    const mine = ctx.smtp.messages.filter((m) => m.to.includes(email));
    if (mine.length >= minMessages) return codeFrom(mine[mine.length - 1]!);
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`no email to ${email} arrived`);
}

/** A received message's text with quoted-printable soft breaks and escapes undone. */
export function textOf(mail: ReceivedMail): string {
  return mail.raw.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
}

/**
 * Runs the outbox until `count` emails to `email` with this subject have arrived; returns the
 * newest one's code (the first group of `pattern`) and text.
 */
async function newestCode(ctx: TestContext, email: string, kind: { subject: string; pattern: RegExp }, count: number): Promise<{ code: string; text: string }> {
  for (let i = 0; i < 100; i++) {
    await ctx.app.outbox.runOnce();
    const mine = ctx.smtp.messages.filter((m) => m.to.includes(email) && m.raw.includes(`Subject: ${kind.subject}`));
    if (mine.length >= count) {
      const text = textOf(mine[mine.length - 1]!);
      const m = kind.pattern.exec(text);
      if (m === null) throw new Error(`no code in:\n${text}`);
      return { code: m[1]!, text };
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`fewer than ${count} "${kind.subject}" emails to ${email} arrived`);
}

/**
 * Runs the outbox until `count` password-reset emails to `email` have arrived (a reset request
 * is an outbox row that the worker turns into the code and its email); returns the newest one's
 * code and text.
 */
export function resetCode(ctx: TestContext, email: string, count = 1): Promise<{ code: string; text: string }> {
  return newestCode(ctx, email, { subject: 'Reset your password', pattern: /password reset code is (\d{6})/ }, count);
}

/** Runs the outbox until `count` email-change emails to the new address `email` have arrived; returns the newest one's code. */
export async function emailChangeCode(ctx: TestContext, email: string, count = 1): Promise<string> {
  return (await newestCode(ctx, email, { subject: 'Confirm your new email address', pattern: /new email address of your account is (\d{6})/ }, count)).code;
}

/** Signs up and verifies a user; returns its credentials and id. */
export async function createVerifiedUser(ctx: TestContext, overrides: Record<string, unknown> = {}) {
  const { res, body, request } = await signUp(ctx, overrides);
  if (res.statusCode !== 201) throw new Error(`sign-up failed: ${res.statusCode} ${res.body}`);
  const email = body.user.email!;
  const code = await latestCode(ctx, email);
  const v = await postJson(ctx, '/auth/v0/verify-email', { email, code });
  if (v.statusCode !== 204) throw new Error(`verify failed: ${v.statusCode} ${v.body}`);
  return { id: body.user.id, username: body.user.username, email, password: request.password as string };
}

/**
 * A verified user, inserted straight into the database with the service's own statement
 * (users.repo.ts insertUser, its email verified) and the test contexts' password hasher: the
 * same row as a sign-up and verification leave, without their requests, emails, verification
 * code or `user.created` and `user.email_verified` events. For tests about what a user does once
 * verified (sessions, sign-in, bans); tests of sign-up, verification, emails or events use
 * {@link createVerifiedUser}. The overrides are normalised as at sign-up but not checked
 * against the password policy.
 * @returns what createVerifiedUser returns.
 * @throws AppError `auth.sign_up.{username,email}_taken` for a taken identifier.
 */
export async function insertVerifiedUser(ctx: TestContext, overrides: { username?: string; email?: string; password?: string } = {}) {
  const username = normalizeUsername(overrides.username ?? uniqueName());
  const email = normalizeEmail(overrides.email ?? `${username}@example.test`);
  const password = overrides.password ?? PASSWORD;
  const normalized = normalizePassword(password);
  if (normalized === undefined) throw new Error('the password must be 8 to 72 characters after NFKC normalisation');
  const passwordHash = await (await testPasswordHasher()).hash(normalized);
  const row = await insertUser(ctx.db, { id: randomUUID(), username, email, phone: null, password_hash: passwordHash, is_email_verified: true }, ctx.clock.now());
  return { id: row.id, username: row.username, email: row.email!, password };
}

/** A parsed Set-Cookie header. */
export interface SetCookie {
  name: string;
  value: string;
  /** Attribute names lower-cased; flag attributes map to true. */
  attributes: Record<string, string | true>;
}

/** Every Set-Cookie header of a response, parsed. */
export function setCookies(res: LightMyRequestResponse): SetCookie[] {
  const raw = res.headers['set-cookie'];
  const list = raw === undefined ? [] : Array.isArray(raw) ? raw : [raw];
  return list.map((line) => {
    const [pair, ...attrs] = line.split(';').map((s) => s.trim());
    const eq = pair!.indexOf('=');
    const attributes: Record<string, string | true> = {};
    for (const a of attrs) {
      const i = a.indexOf('=');
      if (i === -1) attributes[a.toLowerCase()] = true;
      else attributes[a.slice(0, i).toLowerCase()] = a.slice(i + 1);
    }
    return { name: pair!.slice(0, eq), value: pair!.slice(eq + 1), attributes };
  });
}

/** The refresh_token cookie a response sets (throws if none). */
export function refreshCookieOf(res: LightMyRequestResponse): SetCookie {
  const c = setCookies(res).find((x) => x.name === 'refresh_token');
  if (c === undefined) throw new Error(`no refresh_token cookie in ${JSON.stringify(res.headers['set-cookie'])}`);
  return c;
}

/** Signs in with username and password; returns the tokens and session id. */
export async function signIn(ctx: TestContext, creds: { username?: string; email?: string; phone?: string; password: string }, headers: Record<string, string> = {}) {
  const res = await postJson(ctx, '/auth/v0/sign-in', creds, headers);
  if (res.statusCode !== 200) throw new Error(`sign-in failed: ${res.statusCode} ${res.body}`);
  const body = res.json() as { session_id: string; tokens: { access_token: string } };
  return { res, accessToken: body.tokens.access_token, refreshToken: refreshCookieOf(res).value, sessionId: body.session_id };
}

/** POST /auth/v0/refresh with the given refresh token as cookie (or none). */
export function refresh(ctx: TestContext, token: string | undefined): Promise<LightMyRequestResponse> {
  return ctx.app.inject({ method: 'POST', url: '/auth/v0/refresh', headers: token === undefined ? {} : { cookie: `refresh_token=${token}` } });
}

/**
 * Makes the live refresh token of session `sessionId` one of format 1 (32 random bytes, found by
 * its SHA-256 alone; docs/api.md#refresh-token-format), as if it had been issued before the
 * current format: its row takes the hash of a new such token.
 * @returns the token (43 base64url characters).
 */
export async function useFormat1Token(ctx: TestContext, sessionId: string): Promise<string> {
  const token = randomBytes(32).toString('base64url');
  const { rowCount } = await ctx.db.query("UPDATE refresh_tokens SET token_hash = $2, format = 1 WHERE session_id = $1 AND rotated_at IS NULL", [
    sessionId,
    createHash('sha256').update(token).digest('base64url'),
  ]);
  if (rowCount !== 1) throw new Error(`session ${sessionId} has no live refresh token`);
  return token;
}

/** A request with a Bearer token. */
export function withBearer(ctx: TestContext, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, token: string, payload?: unknown): Promise<LightMyRequestResponse> {
  return ctx.app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${token}`, ...(payload === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }),
  });
}

/** Asserts-free shape check helper: the sorted keys of an object. */
export function keysOf(o: unknown): string[] {
  return Object.keys(o as object).sort();
}

/**
 * Asserts an error answer (docs/api.md#error-body): `status`, a JSON body of exactly
 * `{code, message}` in that order, with this `code` and a message.
 */
export function expectError(res: LightMyRequestResponse, status: number, code: string): void {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  expect(keysOf(res.json())).toEqual(['code', 'message']);
  expect(res.json()).toEqual({ code, message: expect.any(String) });
}
