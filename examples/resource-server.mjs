#!/usr/bin/env node
// A resource server (an API of your own) that accepts Latchkey access tokens, with
// @latchkey/verify and nothing but node:http. See docs/integration.md, "A resource server".
//
// Usage:
//   AUTH_URL=https://auth.example.com [AUTH_ISSUER=latchkey] [AUTH_AUDIENCE=latchkey] \
//   [CHECK_SESSION_SECONDS=30] [PORT=4000] node examples/resource-server.mjs
//
// GET /api/hello with `Authorization: Bearer <access token>` answers {"hello": <user id>, ...};
// without a valid token, 401 with the service's Error body. Prints "listening on <url>" when ready.
import { createServer } from 'node:http';
import { createVerifier } from '@latchkey/verify';
import { latchkeyMiddleware } from '@latchkey/verify/express';

const authUrl = process.env.AUTH_URL;
if (authUrl === undefined) {
  process.stderr.write('usage: AUTH_URL=<auth service origin> node examples/resource-server.mjs\n');
  process.exit(2);
}
const checkSeconds = process.env.CHECK_SESSION_SECONDS;

// One verifier per process: it caches the JWKS and the session answers.
const verifier = createVerifier({
  jwksUrl: new URL('/auth/v0/.well-known/jwks.json', authUrl),
  issuer: process.env.AUTH_ISSUER ?? 'latchkey',
  audience: process.env.AUTH_AUDIENCE ?? 'latchkey',
  // Optional: refuse tokens of ended sessions within CHECK_SESSION_SECONDS, at one call to
  // GET /auth/v0/me per token per period. Without it a token stays valid here until it expires.
  ...(checkSeconds === undefined ? {} : { checkSession: { baseUrl: authUrl, cacheSeconds: Number(checkSeconds) } }),
});
// The middleware works with Express, Connect, or plain node:http as here.
const requireToken = latchkeyMiddleware(verifier);

const server = createServer((req, res) => {
  if (req.method !== 'GET' || req.url !== '/api/hello') {
    res.writeHead(404, { 'content-type': 'application/json; charset=utf-8' });
    res.end(JSON.stringify({ code: 'request.not_found', message: 'No such route.' }));
    return;
  }
  requireToken(req, res, () => {
    const { userId, sessionId } = req.auth;
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
    res.end(JSON.stringify({ hello: userId, session: sessionId }));
  });
});

server.listen(Number(process.env.PORT ?? 4000), '127.0.0.1', () => {
  process.stdout.write(`listening on http://127.0.0.1:${server.address().port}\n`);
});
// Stop cleanly on Ctrl-C or a supervisor's SIGTERM.
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => server.close(() => process.exit(0)));
