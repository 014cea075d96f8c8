import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { closeServer, readBody, sendJson } from './http-server.js';

/** An account of the GitHub-compatible server. */
export interface GithubAccount {
  id: number;
  login: string;
  emails: { email: string; primary: boolean; verified: boolean }[];
}

/** What the server does wrong on purpose, for the failure tests. */
export interface GithubFaults {
  /** The token endpoint answers this status (a server error). */
  tokenStatus?: number;
  /** `GET /user` answers this status. */
  userStatus?: number;
}

/**
 * A small GitHub-compatible OAuth 2.0 server on 127.0.0.1: `GET /login/oauth/authorize` (signs
 * in as the account named by the `gh_user` cookie, as if the browser were signed in at GitHub;
 * the cookie `gh_deny=1` makes the user decline), `POST /login/oauth/access_token` (client
 * credentials, redirect URI and the PKCE S256 check; errors in a 200 JSON body, as GitHub
 * answers them), and the REST API's `GET /api/v3/user` and `GET /api/v3/user/emails` (GitHub
 * Enterprise Server's paths).
 */
export interface TestGithubServer {
  /** The web base URL (`OAUTH_<ID>_URL`). */
  readonly url: string;
  /** The REST API base URL (`OAUTH_<ID>_API_URL`). */
  readonly apiUrl: string;
  readonly clientId: string;
  readonly clientSecret: string;
  readonly accounts: Map<string, GithubAccount>;
  readonly faults: GithubFaults;
  /** Token requests received, with whether their PKCE verifier checked out. */
  readonly tokenRequests: { pkce: boolean }[];
  close(): Promise<void>;
}

const sha256url = (text: string): string => createHash('sha256').update(text).digest('base64url');

function cookiesOf(req: IncomingMessage): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0) out.set(part.slice(0, eq).trim(), part.slice(eq + 1).trim());
  }
  return out;
}



/** Starts the server; `redirectUri` is the client's registered callback URL. */
export async function startGithubServer(redirectUri: string): Promise<TestGithubServer> {
  const clientId = 'Iv1.testclient';
  const clientSecret = 'github-client-secret-for-tests-only';
  const accounts = new Map<string, GithubAccount>();
  const faults: GithubFaults = {};
  const tokenRequests: { pkce: boolean }[] = [];
  const codes = new Map<string, { login: string; challenge: string; redirectUri: string }>();
  const tokens = new Map<string, string>();

  const server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://localhost');
      if (req.method === 'GET' && url.pathname === '/login/oauth/authorize') {
        const q = url.searchParams;
        if (q.get('client_id') !== clientId || q.get('redirect_uri') !== redirectUri) return sendJson(res, 400, { error: 'redirect_uri_mismatch' });
        const back = new URL(redirectUri);
        const state = q.get('state');
        if (cookiesOf(req).get('gh_deny') === '1') {
          back.searchParams.set('error', 'access_denied');
          back.searchParams.set('error_description', 'The user has denied your application access.');
        } else {
          const login = cookiesOf(req).get('gh_user');
          const challenge = q.get('code_challenge');
          if (login === undefined || !accounts.has(login)) return sendJson(res, 401, { error: 'not signed in at the test GitHub' });
          if (challenge === null || q.get('code_challenge_method') !== 'S256') return sendJson(res, 400, { error: 'PKCE S256 required by this test server' });
          const code = randomBytes(10).toString('hex');
          codes.set(code, { login, challenge, redirectUri });
          back.searchParams.set('code', code);
        }
        if (state !== null) back.searchParams.set('state', state);
        res.writeHead(302, { location: back.href }).end();
        return;
      }
      if (req.method === 'POST' && url.pathname === '/login/oauth/access_token') {
        const form = new URLSearchParams(await readBody(req));
        if (faults.tokenStatus !== undefined) return sendJson(res, faults.tokenStatus, { message: 'test fault' });
        let id = form.get('client_id');
        let secret = form.get('client_secret');
        const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? '')?.[1];
        if (basic !== undefined) [id, secret] = Buffer.from(basic, 'base64').toString().split(':').map(decodeURIComponent) as [string, string];
        if (id !== clientId || secret !== clientSecret) return sendJson(res, 200, { error: 'incorrect_client_credentials' });
        const code = codes.get(form.get('code') ?? '');
        codes.delete(form.get('code') ?? '');
        const verifier = form.get('code_verifier');
        const pkce = code !== undefined && verifier !== null && sha256url(verifier) === code.challenge;
        tokenRequests.push({ pkce });
        if (code === undefined || form.get('redirect_uri') !== code.redirectUri) return sendJson(res, 200, { error: 'bad_verification_code' });
        if (!pkce) return sendJson(res, 200, { error: 'invalid_grant', error_description: 'code_verifier does not match' });
        const token = `gho_${randomBytes(16).toString('hex')}`;
        tokens.set(token, code.login);
        return sendJson(res, 200, { access_token: token, token_type: 'bearer', scope: 'read:user,user:email' });
      }
      if (req.method === 'GET' && (url.pathname === '/api/v3/user' || url.pathname === '/api/v3/user/emails')) {
        const token = /^(?:Bearer|token) (.+)$/i.exec(req.headers.authorization ?? '')?.[1];
        const account = accounts.get(tokens.get(token ?? '') ?? '');
        if (account === undefined) return sendJson(res, 401, { message: 'Bad credentials' });
        if (url.pathname === '/api/v3/user') {
          if (faults.userStatus !== undefined) return sendJson(res, faults.userStatus, { message: 'test fault' });
          return sendJson(res, 200, { id: account.id, login: account.login, email: null, name: account.login });
        }
        return sendJson(res, 200, account.emails.map((e) => ({ ...e, visibility: e.primary ? 'private' : null })));
      }
      return sendJson(res, 404, { message: 'Not Found' });
    })().catch((err: unknown) => {
      res.writeHead(500).end(String(err));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: base,
    apiUrl: `${base}/api/v3`,
    clientId,
    clientSecret,
    accounts,
    faults,
    tokenRequests,
    close: () => closeServer(server),
  };
}
