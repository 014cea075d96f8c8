import { createHash, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { closeServer, readBody, sendJson } from './http-server.js';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';

/** An account of the provider: the ID token's claims beyond the registered ones. */
export interface RogueAccount {
  sub: string;
  email?: string;
  /** Left out of the ID token when undefined (an absent claim counts as not verified). */
  email_verified?: boolean;
  preferred_username?: string;
}

/** How the provider misbehaves; each unset: it behaves. */
export interface RogueFaults {
  /** The ID token's `nonce` is not the one of the request. */
  wrongNonce?: boolean;
  /** The ID token's `aud` is another client. */
  wrongAudience?: boolean;
  /** The ID token's `iss` is another issuer. */
  wrongIssuer?: boolean;
  /** The ID token is signed by a key that is not in the provider's JWKS. */
  foreignKey?: boolean;
  /** The ID token expired an hour ago. */
  expired?: boolean;
  /** The authorization response's `iss` parameter (RFC 9207): left out, or another issuer. */
  issParam?: 'missing' | 'wrong';
  /** The token endpoint answers this status with an OAuth error body. */
  tokenStatus?: number;
  /** The token endpoint's connection is closed without an answer. */
  tokenHangUp?: boolean;
}

/**
 * A small OpenID Provider on 127.0.0.1 that can misbehave on purpose (a token response
 * "intercepted" and altered, as an attacker in the middle would): discovery advertising RFC 9207
 * `iss`, an authorization endpoint that signs in at once as the account named by the
 * `rogue_user` cookie, a token endpoint that checks the client, the redirect URI and PKCE and
 * issues an ID token with the account's claims, and its JWKS. Real signatures (jose, RS256).
 */
export interface TestRogueProvider {
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string;
  readonly accounts: Map<string, RogueAccount>;
  readonly faults: RogueFaults;
  close(): Promise<void>;
}



/** Starts the provider; `redirectUri` is the client's registered callback URL; `port` 0 (default) takes a free one. */
export async function startRogueProvider(redirectUri: string, options: { port?: number; clientId?: string } = {}): Promise<TestRogueProvider> {
  const clientId = options.clientId ?? 'rogue-client';
  const clientSecret = 'rogue-client-secret-for-tests-only';
  const accounts = new Map<string, RogueAccount>();
  const faults: RogueFaults = {};
  const { privateKey, publicKey } = await generateKeyPair('RS256');
  const foreign = await generateKeyPair('RS256');
  const jwk: JWK = { ...(await exportJWK(publicKey)), kid: 'rogue-1', alg: 'RS256', use: 'sig' };
  const codes = new Map<string, { account: RogueAccount; nonce: string | null; challenge: string }>();
  let issuer = '';

  const sign = (claims: Record<string, unknown>, key: CryptoKey, kid: string): Promise<string> =>
    new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid }).sign(key);

  const server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', issuer);
      if (url.pathname === '/.well-known/openid-configuration') {
        return sendJson(res, 200, {
          issuer,
          authorization_endpoint: `${issuer}/authorize`,
          token_endpoint: `${issuer}/token`,
          jwks_uri: `${issuer}/jwks`,
          response_types_supported: ['code'],
          subject_types_supported: ['public'],
          id_token_signing_alg_values_supported: ['RS256'],
          code_challenge_methods_supported: ['S256'],
          token_endpoint_auth_methods_supported: ['client_secret_basic'],
          authorization_response_iss_parameter_supported: true,
        });
      }
      if (url.pathname === '/jwks') return sendJson(res, 200, { keys: [jwk] });
      if (url.pathname === '/authorize') {
        const q = url.searchParams;
        if (q.get('client_id') !== clientId || q.get('redirect_uri') !== redirectUri) return sendJson(res, 400, { error: 'invalid_request' });
        const login = /(?:^|;\s*)rogue_user=([^;]+)/.exec(req.headers.cookie ?? '')?.[1];
        const account = accounts.get(login ?? '');
        if (account === undefined) return sendJson(res, 401, { error: 'login_required' });
        const code = randomBytes(12).toString('hex');
        codes.set(code, { account, nonce: q.get('nonce'), challenge: q.get('code_challenge') ?? '' });
        const back = new URL(redirectUri);
        back.searchParams.set('code', code);
        back.searchParams.set('state', q.get('state') ?? '');
        if (faults.issParam === 'wrong') back.searchParams.set('iss', 'http://127.0.0.1:1/another-issuer');
        else if (faults.issParam !== 'missing') back.searchParams.set('iss', issuer);
        res.writeHead(302, { location: back.href }).end();
        return;
      }
      if (url.pathname === '/token' && req.method === 'POST') {
        const form = new URLSearchParams(await readBody(req));
        if (faults.tokenHangUp === true) {
          req.socket.destroy();
          return;
        }
        if (faults.tokenStatus !== undefined) return sendJson(res, faults.tokenStatus, { error: 'server_error' });
        const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? '')?.[1];
        const [id, secret] = basic === undefined ? [] : Buffer.from(basic, 'base64').toString().split(':').map(decodeURIComponent);
        if (id !== clientId || secret !== clientSecret) return sendJson(res, 401, { error: 'invalid_client' });
        const grant = codes.get(form.get('code') ?? '');
        codes.delete(form.get('code') ?? '');
        const verifier = form.get('code_verifier') ?? '';
        if (grant === undefined || form.get('redirect_uri') !== redirectUri) return sendJson(res, 400, { error: 'invalid_grant' });
        if (createHash('sha256').update(verifier).digest('base64url') !== grant.challenge) return sendJson(res, 400, { error: 'invalid_grant', error_description: 'PKCE' });
        const now = Math.floor(Date.now() / 1000) - (faults.expired === true ? 7200 : 0);
        const claims = {
          ...grant.account,
          iss: faults.wrongIssuer === true ? 'http://127.0.0.1:1/another-issuer' : issuer,
          aud: faults.wrongAudience === true ? 'another-client' : clientId,
          iat: now,
          exp: now + 300,
          ...(grant.nonce === null ? {} : { nonce: faults.wrongNonce === true ? 'not-the-nonce' : grant.nonce }),
        };
        const idToken = faults.foreignKey === true ? await sign(claims, foreign.privateKey, 'rogue-1') : await sign(claims, privateKey, 'rogue-1');
        return sendJson(res, 200, { access_token: randomBytes(16).toString('hex'), token_type: 'Bearer', expires_in: 300, id_token: idToken });
      }
      return sendJson(res, 404, { error: 'not_found' });
    })().catch((err: unknown) => res.writeHead(500).end(String(err)));
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { issuer, clientId, clientSecret, accounts, faults, close: () => closeServer(server) };
}
