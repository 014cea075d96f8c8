#!/usr/bin/env node
// Serves the browser app example on one origin, as a deployment would (docs/integration.md):
// the page, its script (app.js, as it is), the client's one-file build (@latchkey/client's
// dist/latchkey-client.min.js: no bundler needed), /auth/v0/* forwarded to the Latchkey service
// and /api/* to the resource server (examples/resource-server.mjs).
//
// Usage:
//   AUTH_URL=http://127.0.0.1:3000 API_URL=http://127.0.0.1:4000 [PORT=8080] node examples/browser-app/serve.mjs
// then open http://localhost:8080/ (Chromium keeps the Secure refresh cookie on http://localhost).
// Needs @latchkey/client built (`npm ci` in the clone builds it). Prints "open <url>" when ready.
import { readFileSync } from 'node:fs';
import { createServer, request } from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const { AUTH_URL, API_URL } = process.env;
if (!AUTH_URL || !API_URL) {
  process.stderr.write('usage: AUTH_URL=<auth service> API_URL=<resource server> node examples/browser-app/serve.mjs\n');
  process.exit(2);
}

/** What the server serves besides the forwarded paths: path, file, content type. */
const FILES = new Map([
  ['/', { file: path.join(here, 'index.html'), type: 'text/html; charset=utf-8' }],
  ['/app.js', { file: path.join(here, 'app.js'), type: 'text/javascript; charset=utf-8' }],
  ['/latchkey-client.min.js', { file: require.resolve('@latchkey/client/latchkey-client.min.js'), type: 'text/javascript; charset=utf-8' }],
]);
const contents = new Map([...FILES].map(([url, { file }]) => [url, readFileSync(file)]));

/** Forwards a request to `target` unchanged (cookies and Set-Cookie included) and pipes the answer back. */
function forward(req, res, target) {
  const url = new URL(req.url, target);
  const upstream = request(url, { method: req.method, headers: { ...req.headers, host: url.host } }, (answer) => {
    res.writeHead(answer.statusCode, answer.headers);
    answer.pipe(res);
  });
  upstream.on('error', () => {
    res.writeHead(502, { 'content-type': 'application/json; charset=utf-8' });
    res.end(JSON.stringify({ code: 'service_unavailable', message: 'The service is temporarily unavailable; try again shortly.' }));
  });
  req.pipe(upstream);
}

const server = createServer((req, res) => {
  if (req.url.startsWith('/auth/v0/')) return forward(req, res, AUTH_URL);
  if (req.url.startsWith('/api/')) return forward(req, res, API_URL);
  const served = FILES.get(req.url);
  if (served !== undefined) {
    res.writeHead(200, { 'content-type': served.type });
    return res.end(contents.get(req.url));
  }
  res.writeHead(404).end();
});
server.listen(Number(process.env.PORT ?? 8080), '127.0.0.1', () => {
  process.stdout.write(`open http://localhost:${server.address().port}/\n`);
});
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => server.close(() => process.exit(0)));
