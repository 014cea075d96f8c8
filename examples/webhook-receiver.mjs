#!/usr/bin/env node
// A webhook receiver for Latchkey's events, with @latchkey/verify and nothing but node:http.
// See docs/api.md, "Events and webhooks".
//
// Usage:
//   WEBHOOK_SECRET=whsec_... [PORT=4001] node examples/webhook-receiver.mjs
//
// Add it as an endpoint (`latchkey webhooks add --url http://localhost:4001/webhooks --events '*'`,
// which prints WEBHOOK_SECRET; the service needs WEBHOOK_ALLOW_PRIVATE_NETWORKS=true to deliver to
// this machine). POST /webhooks verifies each request on its raw body, then handles each event
// once: a retry of an event already handled (the same webhook-id) is acknowledged and skipped.
// Every request is answered 2xx quickly, or the service retries it; a request that does not
// verify is answered 400. Each outcome is printed as one JSON line; "listening on <url>" when ready.
import { createServer } from 'node:http';
import { verifyWebhook, WebhookVerifyError } from '@latchkey/verify';

const secret = process.env.WEBHOOK_SECRET;
if (secret === undefined || !secret.startsWith('whsec_')) {
  process.stderr.write('usage: WEBHOOK_SECRET=whsec_... node examples/webhook-receiver.mjs\n');
  process.exit(2);
}

// The ids of the events handled, kept two days: longer than the service's retry schedule (about
// 28 hours; a redelivery after that is an operator's retry). A real app keeps them in its
// database, in the transaction that handles the event, so "handled" and "remembered" cannot part.
const SEEN_MS = 48 * 60 * 60 * 1000;
const seen = new Map();
const remember = (id) => {
  const now = Date.now();
  for (const [key, until] of seen) if (until > now) break; else seen.delete(key);
  seen.set(id, now + SEEN_MS);
};

/** What this app does with an event; here it only prints it. */
function handle(event) {
  process.stdout.write(`${JSON.stringify({ handled: event.type, data: event.data })}\n`);
}

/** Reads the body as bytes: the signature covers them exactly, so never parse and re-serialise before verifying. */
function rawBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (chunk) => {
      size += chunk.length;
      if (size > 256 * 1024) req.destroy(new Error('body too large'));
      else chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

const server = createServer(async (req, res) => {
  if (req.method !== 'POST' || req.url !== '/webhooks') {
    res.writeHead(404).end();
    return;
  }
  let verified;
  try {
    verified = verifyWebhook({ secret, headers: req.headers, body: await rawBody(req) });
  } catch (err) {
    process.stdout.write(`${JSON.stringify({ refused: err instanceof WebhookVerifyError ? err.code : 'unreadable' })}\n`);
    res.writeHead(400).end();
    return;
  }
  if (seen.has(verified.id)) {
    process.stdout.write(`${JSON.stringify({ duplicate: verified.id })}\n`);
  } else {
    handle(verified.event);
    remember(verified.id);
  }
  res.writeHead(204).end();
});

server.listen(Number(process.env.PORT ?? 4001), '127.0.0.1', () => {
  process.stdout.write(`listening on http://127.0.0.1:${server.address().port}/webhooks\n`);
});
