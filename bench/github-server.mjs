// A GitHub-compatible identity provider for the benchmark's `oauth-callback` scenario
// (bench/lib.mjs): the parts of GitHub's OAuth 2.0 web flow and REST API the service's `github`
// provider type uses (docs/api.md "Sign-in with an identity provider"), without a UI, so the
// benchmark can drive a sign-in end to end. The test suite's test/helpers/github-server.ts does
// the same for the tests (in TypeScript, outside the build); this one runs as a plain child
// process so its work does not share the load generator's event loop.
//
//   node bench/github-server.mjs
//
//   GET  /login/oauth/authorize      signs in as the account named by the `gh_user` cookie (as if
//                                    the browser were signed in at GitHub; any name of
//                                    [a-z0-9_-] is an account, made on first use), checks the
//                                    client id and redirect URI, requires PKCE S256, and
//                                    answers 302 to the redirect URI with `code` and `state`.
//   POST /login/oauth/access_token   client credentials (form or Basic), the code (once), its
//                                    redirect URI and the PKCE S256 check (RFC 7636 section 4.6);
//                                    errors in a 200 JSON body, as GitHub answers them.
//   GET  /api/v3/user, /api/v3/user/emails   the account of a Bearer access token (GitHub
//                                    Enterprise Server's paths); one verified primary email.
//   GET  /healthz                    readiness probe.
//
// Settings (environment): PORT (0: any), BENCH_GITHUB_CLIENT_ID, BENCH_GITHUB_CLIENT_SECRET and
// BENCH_GITHUB_REDIRECT_URI (the service's callback URL). Listens on 127.0.0.1. Codes and
// tokens live in memory; a code is 10 random bytes, a token 16, as in the test server.
import { createHash, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';

const clientId = process.env.BENCH_GITHUB_CLIENT_ID;
const clientSecret = process.env.BENCH_GITHUB_CLIENT_SECRET;
const redirectUri = process.env.BENCH_GITHUB_REDIRECT_URI;
if (!clientId || !clientSecret || !redirectUri) throw new Error('BENCH_GITHUB_CLIENT_ID, BENCH_GITHUB_CLIENT_SECRET and BENCH_GITHUB_REDIRECT_URI are required');

/** Codes not yet exchanged: code → {login, challenge}. */
const codes = new Map();
/** Access tokens: token → login. */
const tokens = new Map();
/** Account ids by login, numbered in order of first use. */
const accountIds = new Map();

const sha256url = (text) => createHash('sha256').update(text).digest('base64url');
const idOf = (login) => {
  if (!accountIds.has(login)) accountIds.set(login, 1_000_000 + accountIds.size);
  return accountIds.get(login);
};

function sendJson(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) }).end(text);
}

function cookieOf(req, name) {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

async function handle(req, res) {
  const url = new URL(req.url ?? '/', 'http://127.0.0.1');
  if (req.method === 'GET' && url.pathname === '/healthz') return sendJson(res, 200, { status: 'ok' });
  if (req.method === 'GET' && url.pathname === '/login/oauth/authorize') {
    const q = url.searchParams;
    if (q.get('client_id') !== clientId || q.get('redirect_uri') !== redirectUri) return sendJson(res, 400, { error: 'redirect_uri_mismatch' });
    const login = cookieOf(req, 'gh_user');
    if (login === undefined || !/^[a-z0-9_-]{1,39}$/.test(login)) return sendJson(res, 401, { error: 'not signed in' });
    if (q.get('code_challenge') === null || q.get('code_challenge_method') !== 'S256') return sendJson(res, 400, { error: 'PKCE S256 required' });
    const code = randomBytes(10).toString('hex');
    codes.set(code, { login, challenge: q.get('code_challenge') });
    const back = new URL(redirectUri);
    back.searchParams.set('code', code);
    if (q.get('state') !== null) back.searchParams.set('state', q.get('state'));
    res.writeHead(302, { location: back.href }).end();
    return undefined;
  }
  if (req.method === 'POST' && url.pathname === '/login/oauth/access_token') {
    const form = new URLSearchParams(await readBody(req));
    let id = form.get('client_id');
    let secret = form.get('client_secret');
    const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (basic !== undefined) [id, secret] = Buffer.from(basic, 'base64').toString().split(':').map(decodeURIComponent);
    if (id !== clientId || secret !== clientSecret) return sendJson(res, 200, { error: 'incorrect_client_credentials' });
    const code = codes.get(form.get('code') ?? '');
    codes.delete(form.get('code') ?? '');
    if (code === undefined || form.get('redirect_uri') !== redirectUri) return sendJson(res, 200, { error: 'bad_verification_code' });
    const verifier = form.get('code_verifier');
    if (verifier === null || sha256url(verifier) !== code.challenge) return sendJson(res, 200, { error: 'invalid_grant', error_description: 'code_verifier does not match' });
    const token = `gho_${randomBytes(16).toString('hex')}`;
    tokens.set(token, code.login);
    return sendJson(res, 200, { access_token: token, token_type: 'bearer', scope: 'read:user,user:email' });
  }
  if (req.method === 'GET' && (url.pathname === '/api/v3/user' || url.pathname === '/api/v3/user/emails')) {
    const token = /^(?:Bearer|token) (.+)$/i.exec(req.headers.authorization ?? '')?.[1];
    const login = tokens.get(token ?? '');
    if (login === undefined) return sendJson(res, 401, { message: 'Bad credentials' });
    if (url.pathname === '/api/v3/user') return sendJson(res, 200, { id: idOf(login), login, email: null, name: login });
    return sendJson(res, 200, [{ email: `${login}@bench.example`, primary: true, verified: true, visibility: 'private' }]);
  }
  return sendJson(res, 404, { message: 'Not Found' });
}

const server = createServer((req, res) => {
  handle(req, res).catch((err) => res.writeHead(500).end(String(err)));
});
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => server.close(() => process.exit(0)));
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => process.stdout.write(`listening ${server.address().port}\n`));
