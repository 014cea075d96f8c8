import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import express from 'express';
import Fastify from 'fastify';
import { Webhook } from 'standardwebhooks';
import { afterAll, describe, expect, it } from 'vitest';
import { newWebhookSecret, webhookSignatureHeader } from '../../src/modules/webhooks/webhook-signature.js';
import { verifyWebhook, WebhookVerifyError, type WebhookVerifyErrorCode } from '../../packages/verify/src/index.js';

/**
 * @latchkey/verify's `verifyWebhook` against the `standardwebhooks` npm package, both ways, and
 * the raw-body recipes of its README for Fastify and Express, on real servers. The service's own
 * signatures (src/modules/webhooks/webhook-signature.ts) are checked by both verifiers too.
 */

const NOW = new Date('2026-05-01T12:00:00Z');
const NOW_S = Math.floor(NOW.getTime() / 1000);
const BODY = '{"type":"user.deleted","timestamp":"2026-05-01T11:59:59.000Z","data":{"user_id":"0b5e7a4c-3f1d-4c8e-9a2b-6d7f8e9a0b1c","cause":"owner"}}';
const ID = '019e8b3a-4f2c-7abc-8def-0123456789ab';

/** Headers as the service sends them, signed with `secrets` at `timestamp`. */
function serviceHeaders(secrets: string[], timestamp = NOW_S, body = BODY): Record<string, string> {
  return { 'webhook-id': ID, 'webhook-timestamp': String(timestamp), 'webhook-signature': webhookSignatureHeader(secrets, { id: ID, timestamp, body }), 'content-type': 'application/json' };
}

/** The code verifyWebhook refuses with, or 'accepted'. */
function outcome(options: Parameters<typeof verifyWebhook>[0]): WebhookVerifyErrorCode | 'accepted' {
  try {
    verifyWebhook(options);
    return 'accepted';
  } catch (err) {
    if (err instanceof WebhookVerifyError) return err.code;
    throw err;
  }
}

describe('verifyWebhook and the standardwebhooks package', () => {
  const secret = newWebhookSecret();
  const wh = new Webhook(secret);

  it('accepts what standardwebhooks signs, and standardwebhooks accepts what the service signs', () => {
    const signature = wh.sign(ID, NOW, BODY);
    const headers = { 'webhook-id': ID, 'webhook-timestamp': String(NOW_S), 'webhook-signature': signature };
    expect(verifyWebhook({ secret, headers, body: BODY, now: NOW })).toEqual({ id: ID, timestamp: NOW_S, event: JSON.parse(BODY) });
    // The service's signature is the package's, byte for byte.
    expect(serviceHeaders([secret])['webhook-signature']).toBe(signature);
    const realNow = Math.floor(Date.now() / 1000);
    expect(wh.verify(BODY, serviceHeaders([secret], realNow))).toEqual(JSON.parse(BODY));
    expect(verifyWebhook({ secret, headers: serviceHeaders([secret], realNow), body: BODY }).id).toBe(ID);
  });

  it('any listed v1 signature verifies (rotation: both secrets), other schemes are ignored, and both verifiers agree', () => {
    const previous = newWebhookSecret();
    const headers = serviceHeaders([secret, previous], Math.floor(Date.now() / 1000));
    expect(headers['webhook-signature']!.split(' ')).toHaveLength(2);
    for (const s of [secret, previous]) {
      expect(outcome({ secret: s, headers, body: BODY }), 'verifyWebhook').toBe('accepted');
      expect(new Webhook(s).verify(BODY, headers), 'standardwebhooks').toEqual(JSON.parse(BODY));
    }
    const other = newWebhookSecret();
    expect(outcome({ secret: other, headers, body: BODY })).toBe('invalid_signature');
    expect(() => new Webhook(other).verify(BODY, headers)).toThrow();
    expect(outcome({ secret: [other, previous], headers, body: BODY })).toBe('accepted');
    const onlyV1a = { ...headers, 'webhook-signature': `v1a,${headers['webhook-signature']!.split(' ')[0]!.slice(3)}` };
    expect(outcome({ secret, headers: onlyV1a, body: BODY })).toBe('invalid_signature');
  });

  it('refuses a changed body, id or timestamp, a timestamp more than 5 minutes away either way, and missing headers', () => {
    const headers = serviceHeaders([secret]);
    expect(outcome({ secret, headers, body: BODY.replace('owner', 'operator'), now: NOW })).toBe('invalid_signature');
    expect(outcome({ secret, headers: { ...headers, 'webhook-id': `${ID}x` }, body: BODY, now: NOW })).toBe('invalid_signature');
    expect(outcome({ secret, headers: { ...headers, 'webhook-timestamp': String(NOW_S + 1) }, body: BODY, now: NOW })).toBe('invalid_signature');
    for (const skew of [-300, 300]) expect(outcome({ secret, headers, body: BODY, now: new Date(NOW.getTime() + skew * 1000) }), `${skew} s`).toBe('accepted');
    for (const skew of [-301, 301]) expect(outcome({ secret, headers, body: BODY, now: new Date(NOW.getTime() + skew * 1000) }), `${skew} s`).toBe('timestamp_out_of_tolerance');
    expect(outcome({ secret, headers, body: BODY, now: new Date(NOW.getTime() + 600_000), toleranceSeconds: 600 })).toBe('accepted');
    expect(outcome({ secret, headers: { ...headers, 'webhook-timestamp': '12.5' }, body: BODY, now: NOW })).toBe('invalid_timestamp');
    for (const name of ['webhook-id', 'webhook-timestamp', 'webhook-signature']) {
      const { [name]: _gone, ...rest } = headers;
      expect(outcome({ secret, headers: rest, body: BODY, now: NOW }), name).toBe('missing_header');
    }
    expect(outcome({ secret: 'whsec_', headers, body: BODY, now: NOW })).toBe('invalid_secret');
    const notJson = 'not json';
    expect(outcome({ secret, headers: serviceHeaders([secret], NOW_S, notJson), body: notJson, now: NOW })).toBe('invalid_body');
  });

  it('takes a Fetch API Headers object, repeated header values and the body as bytes', () => {
    const headers = serviceHeaders([secret]);
    expect(outcome({ secret, headers: new Headers(headers), body: BODY, now: NOW })).toBe('accepted');
    expect(outcome({ secret, headers: { ...headers, 'webhook-id': [ID, 'other'] }, body: BODY, now: NOW })).toBe('accepted');
    expect(outcome({ secret, headers, body: new TextEncoder().encode(BODY), now: NOW })).toBe('accepted');
  });
});

describe('the raw-body recipes of the README', () => {
  const secret = newWebhookSecret();
  const closers: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const close of closers) await close();
  });

  /** POSTs BODY signed now (or forged) to `url`. */
  const deliver = (url: string, forged = false) => {
    const headers = serviceHeaders([forged ? newWebhookSecret() : secret], Math.floor(Date.now() / 1000));
    return fetch(url, { method: 'POST', headers, body: BODY });
  };

  it('Fastify: a JSON parser that keeps the raw string, in the webhook route\'s own plugin', async () => {
    const seen: string[] = [];
    const app = Fastify();
    await app.register(async (hooks) => {
      hooks.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => done(null, body));
      hooks.post('/webhooks', async (req, reply) => {
        try {
          const { id, event } = verifyWebhook({ secret, headers: req.headers, body: req.body as string });
          seen.push(`${id} ${event.type}`);
          return reply.code(204).send();
        } catch (err) {
          if (err instanceof WebhookVerifyError) return reply.code(400).send();
          throw err;
        }
      });
    });
    // Elsewhere in the app JSON is parsed as usual.
    app.post('/other', async (req) => req.body);
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    closers.push(() => app.close());
    expect((await deliver(`${url}/webhooks`)).status).toBe(204);
    expect((await deliver(`${url}/webhooks`, true)).status).toBe(400);
    expect(seen).toEqual([`${ID} user.deleted`]);
    expect(await (await fetch(`${url}/other`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"a":1}' })).json()).toEqual({ a: 1 });
  });

  it('Express: express.raw() on the webhook route', async () => {
    const seen: string[] = [];
    const app = express();
    app.post('/webhooks', express.raw({ type: 'application/json' }), (req, res) => {
      try {
        const { id, event } = verifyWebhook({ secret, headers: req.headers, body: req.body as Buffer });
        seen.push(`${id} ${event.type}`);
        res.sendStatus(204);
      } catch (err) {
        res.sendStatus(err instanceof WebhookVerifyError ? 400 : 500);
      }
    });
    const server: Server = await new Promise((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    closers.push(() => new Promise((resolve) => server.close(resolve)));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    expect((await deliver(`${url}/webhooks`)).status).toBe(204);
    expect((await deliver(`${url}/webhooks`, true)).status).toBe(400);
    expect(seen).toEqual([`${ID} user.deleted`]);
  });
});
