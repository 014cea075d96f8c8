#!/usr/bin/env node
// Verifies a Latchkey access token the way another service (a resource server) should:
// with the public keys from the JWKS endpoint, pinned to RS256, checking issuer, audience,
// expiry and the token type. See docs/integration.md.
//
// Usage:
//   AUTH_JWKS_URL=https://auth.example.com/auth/v0/.well-known/jwks.json \
//   AUTH_ISSUER=latchkey AUTH_AUDIENCE=latchkey \
//   node examples/verify-token.mjs <access token>        (or the token in ACCESS_TOKEN)
//
// Prints the verified claims as JSON and exits 0, or prints why the token is refused and exits 1
// (2 for a usage error). Needs the `jose` package (npm install jose).
import { createRemoteJWKSet, jwtVerify } from 'jose';

const jwksUrl = process.env.AUTH_JWKS_URL;
const issuer = process.env.AUTH_ISSUER ?? 'latchkey';
const audience = process.env.AUTH_AUDIENCE ?? 'latchkey';
const token = process.argv[2] ?? process.env.ACCESS_TOKEN;

if (jwksUrl === undefined || token === undefined) {
  process.stderr.write('usage: AUTH_JWKS_URL=<url> [AUTH_ISSUER=..] [AUTH_AUDIENCE=..] node examples/verify-token.mjs <access token>\n');
  process.exit(2);
}

/** The JWKS cache lifetime the auth service advertises (Cache-Control: max-age=300), in ms. */
const JWKS_CACHE_MAX_AGE_MS = 300_000;

// One key set per process, not per request: it fetches the JWKS when it first needs it, keeps it
// for as long as the service allows (jose's own default is 10 minutes; a retired or leaked key
// should drop out within the advertised 300 s), and refetches at once (at most every 30 s) when a
// token names a kid it does not know, as after the service starts signing with a new key
// (docs/key-rotation.md).
const jwks = createRemoteJWKSet(new URL(jwksUrl), { cacheMaxAge: JWKS_CACHE_MAX_AGE_MS });

try {
  const { payload, protectedHeader } = await jwtVerify(token, jwks, {
    algorithms: ['RS256'], // never let the token choose its algorithm
    issuer,
    audience,
    typ: 'at+jwt', // RFC 9068 access token: an ID token or other JWT is refused
    clockTolerance: 5, // seconds of clock skew, as the auth service allows
    requiredClaims: ['sub', 'sid', 'exp', 'iat'],
  });
  // payload.sub is the user id, payload.sid the session id. The signature proves the token was
  // issued and has not expired, NOT that the session is still active: a token of a revoked
  // session stays valid here until exp. Call GET /auth/v0/me with it where that matters.
  process.stdout.write(`${JSON.stringify({ valid: true, kid: protectedHeader.kid, claims: payload })}\n`);
} catch (err) {
  process.stderr.write(`invalid token: ${err.code ?? 'error'}: ${err.message}\n`);
  process.exit(1);
}
