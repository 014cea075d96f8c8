import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider, { type Configuration } from 'oidc-provider';
import { closeServer } from './http-server.js';

/** The claims an account of the test provider has beyond `sub`. */
export interface AccountClaims {
  email?: string;
  email_verified?: boolean;
  preferred_username?: string;
}

/** panva's oidc-provider (a certified OpenID Provider) on 127.0.0.1, with one registered client. */
export interface TestOpenIdProvider {
  /** `http://127.0.0.1:<port>`, the issuer. */
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string;
  /** Accounts by id (the `login` typed on the provider's sign-in page); the claims it releases. */
  readonly accounts: Map<string, AccountClaims>;
  close(): Promise<void>;
}

/**
 * Starts oidc-provider as an OpenID Provider on a free loopback port: the authorization code
 * flow with PKCE, discovery, JWKS, UserInfo, RFC 9207 `iss` in authorization responses, and
 * its development sign-in and consent pages (any password signs in as the typed login), which
 * the tests drive over HTTP. Claims go to UserInfo, not the ID token (oidc-provider's default
 * for the code flow), so the relying party's UserInfo path is exercised too.
 * @param redirectUris the client's registered callback URLs.
 */
export async function startOpenIdProvider(redirectUris: readonly string[], options: { clientId?: string; clientSecret?: string } = {}): Promise<TestOpenIdProvider> {
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const clientId = options.clientId ?? 'latchkey-test';
  const clientSecret = options.clientSecret ?? 'a-client-secret-for-tests-only-0123456789';
  const accounts = new Map<string, AccountClaims>();
  const configuration: Configuration = {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: [...redirectUris],
        response_types: ['code'],
        grant_types: ['authorization_code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
    ],
    findAccount: (_ctx, id) => ({ accountId: id, claims: () => ({ sub: id, ...(accounts.get(id) ?? {}) }) }),
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['preferred_username'] },
    cookies: { keys: ['oidc-provider-test-cookie-key'] },
    // Every client must use PKCE, as Latchkey always does.
    pkce: { required: () => true },
    features: { devInteractions: { enabled: true } },
  };
  const provider = new Provider(issuer, configuration);
  // The development-only warnings of oidc-provider are expected here.
  provider.on('server_error', (_ctx, err) => console.error('oidc-provider server_error', err));
  server.on('request', provider.callback());
  return {
    issuer,
    clientId,
    clientSecret,
    accounts,
    close: () => closeServer(server),
  };
}
