import { randomBytes } from 'node:crypto';
import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';
import { demoPageHtml } from './demo.page.js';

/** Longest otpauth URI the demo renders (a real one is under 200 characters). */
const MAX_OTPAUTH_URI_LENGTH = 512;
const TotpQrRequestSchema = Type.Object(
  { otpauth_uri: Type.String({ pattern: '^otpauth://totp/', maxLength: MAX_OTPAUTH_URI_LENGTH }) },
  { additionalProperties: false },
);

/**
 * The QR code of an otpauth URI as SVG (the `qrcode` package; error correction M, a quiet zone
 * of 2 modules). The package is loaded on first use: only the demo needs it, not the service's start.
 */
export async function totpQrSvg(uri: string): Promise<string> {
  const { default: QRCode } = await import('qrcode');
  return QRCode.toString(uri, { type: 'svg', errorCorrectionLevel: 'M', margin: 2 });
}

/** Bytes of CSPRNG output per CSP nonce: 128 bits, as CSP Level 3 §7.4 recommends at least. */
export const CSP_NONCE_BYTES = 16;

/**
 * The Content-Security-Policy of the demo page: only this origin, the page's own inline script
 * and style by nonce (no `unsafe-inline`), API calls to this origin only, no plugins, no
 * `<base>` rewriting, no form posts elsewhere, and no framing (clickjacking).
 */
export function demoContentSecurityPolicy(nonce: string): string {
  return [
    "default-src 'self'",
    `script-src 'nonce-${nonce}'`,
    `style-src 'nonce-${nonce}'`,
    "connect-src 'self'",
    "img-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/**
 * GET /demo (under the API prefix): the demo page. Registered only when
 * DEMO_PAGE=true; otherwise the path is an unknown route (404 `request.not_found`). Each answer
 * has a fresh CSP nonce, `Cache-Control: no-store` (set for every answer in app.ts) and
 * `Referrer-Policy: no-referrer`. Hidden from the OpenAPI document: it is no part of the API.
 */
export function demoRoutes(deps: { apiPrefix: string }): FastifyPluginAsync {
  return async (app) => {
    app.get('/demo', { schema: { hide: true } }, async (_request, reply) => {
      const nonce = randomBytes(CSP_NONCE_BYTES).toString('base64');
      return reply
        .header('content-security-policy', demoContentSecurityPolicy(nonce))
        .header('referrer-policy', 'no-referrer')
        .type('text/html; charset=utf-8')
        .send(demoPageHtml({ nonce, apiPrefix: deps.apiPrefix }));
    });
    // The demo's QR code of a TOTP setup: the page posts the otpauth URI the API just gave it and
    // shows the SVG. The URI holds the secret, so it travels in a body, never in a URL (logs).
    app.post(
      '/demo/totp-qr',
      { schema: { hide: true, body: TotpQrRequestSchema }, bodyLimit: 1024, config: { validationError: 'auth.mfa.validation_failed' } },
      async (request, reply) => reply.type('image/svg+xml; charset=utf-8').send(await totpQrSvg((request.body as { otpauth_uri: string }).otpauth_uri)),
    );
  };
}
