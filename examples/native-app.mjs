#!/usr/bin/env node
// A native client (a command-line tool, a desktop or mobile app) of Latchkey. Outside a browser
// nothing stores the refresh cookie for you: the app keeps the `refresh_token` value itself, in
// the platform's secure storage (here a file readable by the user only), sends it back as a
// Cookie header to POST /auth/v0/refresh, and saves the new one every refresh answers, since the
// old one is spent (docs/api.md#refresh-token-rotation). See docs/integration.md, "A native app".
//
// Usage:
//   AUTH_URL=https://auth.example.com SESSION_FILE=~/.config/myapp/session \
//     LATCHKEY_USERNAME=alice LATCHKEY_PASSWORD=… [LATCHKEY_TOTP=123456] node examples/native-app.mjs sign-in
//   AUTH_URL=… SESSION_FILE=… node examples/native-app.mjs me        (refreshes, then GET /me)
//   AUTH_URL=… SESSION_FILE=… node examples/native-app.mjs logout
//
// Prints one JSON line per command and exits 0; on an error answer prints the Error body to
// stderr and exits 1 (2 for a usage error).
import { chmodSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';

const api = `${(process.env.AUTH_URL ?? '').replace(/\/+$/, '')}/auth/v0`;
const sessionFile = process.env.SESSION_FILE;
const command = process.argv[2];
if (!process.env.AUTH_URL || !sessionFile || !['sign-in', 'me', 'logout'].includes(command)) {
  process.stderr.write('usage: AUTH_URL=<url> SESSION_FILE=<path> node examples/native-app.mjs sign-in|me|logout\n');
  process.exit(2);
}

/** The refresh_token value from an answer's Set-Cookie headers (docs/api.md#refresh-cookie). */
function refreshTokenOf(res) {
  for (const line of res.headers.getSetCookie()) {
    const match = /^refresh_token=([^;]*)/.exec(line);
    if (match) return match[1];
  }
  throw new Error('the answer set no refresh_token');
}

/** Saves the refresh token, readable by this user only, replacing the old file at once (never half-written). */
function saveRefreshToken(token) {
  const temporary = `${sessionFile}.${process.pid}.tmp`;
  writeFileSync(temporary, token, { mode: 0o600 });
  chmodSync(temporary, 0o600);
  renameSync(temporary, sessionFile);
}

/** Throws the service's Error body of an answer that is not 2xx. */
async function check(res) {
  if (res.ok) return res;
  const body = await res.json().catch(() => ({ code: 'unexpected_response', message: `HTTP ${res.status}` }));
  process.stderr.write(`${JSON.stringify({ status: res.status, ...body })}\n`);
  process.exit(1);
}

/**
 * Exchanges the saved refresh token for an access token and saves its successor. Run one refresh
 * at a time per saved token (a lock in a multi-threaded app): presenting a spent token again is
 * reuse, and ends the session (docs/api.md#reuse-detection).
 */
async function refresh() {
  let saved;
  try {
    saved = readFileSync(sessionFile, 'utf8');
  } catch {
    process.stderr.write('not signed in: run sign-in first\n');
    process.exit(1);
  }
  const res = await fetch(`${api}/refresh`, { method: 'POST', headers: { cookie: `refresh_token=${saved}` } });
  if (res.status === 401) rmSync(sessionFile, { force: true }); // the session is over: sign in again
  await check(res);
  saveRefreshToken(refreshTokenOf(res));
  return (await res.json()).tokens.access_token;
}

/** The value of cookie `name` from an answer's Set-Cookie headers, or undefined. */
function cookieOf(res, name) {
  for (const line of res.headers.getSetCookie()) if (line.startsWith(`${name}=`)) return line.slice(name.length + 1).split(';')[0];
  return undefined;
}

if (command === 'sign-in') {
  let res = await fetch(`${api}/sign-in`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: process.env.LATCHKEY_USERNAME, password: process.env.LATCHKEY_PASSWORD }),
  });
  // An account with a second factor: 403 auth.mfa_required and a challenge cookie, which goes
  // back with the code to the second step (docs/api.md#sign-in-second-step).
  const challenge = res.status === 403 ? cookieOf(res, 'mfa_challenge') : undefined;
  if (challenge !== undefined && process.env.LATCHKEY_TOTP) {
    await res.body?.cancel();
    res = await fetch(`${api}/sign-in/mfa`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', cookie: `mfa_challenge=${challenge}` },
      body: JSON.stringify({ code: process.env.LATCHKEY_TOTP }),
    });
  }
  await check(res);
  saveRefreshToken(refreshTokenOf(res));
  const body = await res.json();
  process.stdout.write(`${JSON.stringify({ signedIn: body.user.username, session: body.session_id })}\n`);
} else if (command === 'me') {
  // A real app keeps the access token in memory while it runs and refreshes shortly before it
  // expires; a command that runs once refreshes at its start.
  const accessToken = await refresh();
  const res = await check(await fetch(`${api}/me`, { headers: { authorization: `Bearer ${accessToken}` } }));
  const body = await res.json();
  process.stdout.write(`${JSON.stringify({ user: body.user.username, session: body.session_id })}\n`);
} else {
  const accessToken = await refresh();
  await check(await fetch(`${api}/logout`, { method: 'POST', headers: { authorization: `Bearer ${accessToken}` } }));
  rmSync(sessionFile, { force: true });
  process.stdout.write(`${JSON.stringify({ loggedOut: true })}\n`);
}
