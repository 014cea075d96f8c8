/**
 * The settings of sign-in with identity providers, checked at start (README "Configuration"),
 * and the two rules the flows apply to input: where a flow may return
 * (docs/api.md#redirect_to) and how a new account's username is made (docs/api.md#sign-in-mode).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { redirectTarget, withError } from '../../src/modules/oauth/redirect-target.js';
import { derivedUsername, usernameWithSuffix } from '../../src/modules/oauth/username.js';

const REDIRECTS = 'https://app.example.com/signed-in';
const GOOGLE = { OAUTH_PROVIDERS: 'google', OAUTH_GOOGLE_CLIENT_ID: 'id', OAUTH_GOOGLE_CLIENT_SECRET: 'secret', OAUTH_REDIRECT_URLS: REDIRECTS };

/** The problems loadConfig reports for `env`, or [] when it accepts it. */
function problems(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
}

describe('loadConfig: identity providers (README "Configuration")', () => {
  it('defaults: no provider, PUBLIC_URL on PORT, REAUTH_MAX_AGE_SECONDS 600, no linking by email', () => {
    const c = loadConfig({});
    expect(c.oauth).toEqual({ providers: [], redirectUrls: [], linkVerifiedEmail: false });
    expect(c.publicUrl).toBe('http://localhost:3000');
    expect(loadConfig({ PORT: '8080' }).publicUrl).toBe('http://localhost:8080');
    expect(c.reauthMaxAgeSeconds).toBe(600);
    expect(loadConfig({ PUBLIC_URL: 'https://auth.example.com/' }).publicUrl).toBe('https://auth.example.com');
  });

  it('presets: google (issuer, name, scopes) and github (type, URLs, scopes), in configured order', () => {
    const c = loadConfig({ ...GOOGLE, OAUTH_PROVIDERS: 'github,google', OAUTH_GITHUB_CLIENT_ID: 'gid', OAUTH_GITHUB_CLIENT_SECRET: 'gsecret' });
    expect(c.oauth.providers).toEqual([
      { id: 'github', type: 'github', name: 'GitHub', issuer: 'https://github.com', apiUrl: 'https://api.github.com', clientId: 'gid', clientSecret: 'gsecret', scopes: ['read:user', 'user:email'], responseMode: 'query' },
      { id: 'google', type: 'oidc', name: 'Google', issuer: 'https://accounts.google.com', apiUrl: undefined, clientId: 'id', clientSecret: 'secret', scopes: ['openid', 'email', 'profile'], responseMode: 'query' },
    ]);
    expect(c.oauth.redirectUrls).toEqual([REDIRECTS]);
  });

  it('a generic provider: its issuer, name, scopes, response mode; GitHub Enterprise URLs; the client secret from a file', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'oauth-config-'));
    writeFileSync(path.join(dir, 'secret'), ' kc secret \n');
    const c = loadConfig({
      OAUTH_PROVIDERS: 'keycloak,ghe',
      OAUTH_KEYCLOAK_ISSUER: 'https://sso.example.com/realms/staff',
      OAUTH_KEYCLOAK_CLIENT_ID: 'latchkey',
      OAUTH_KEYCLOAK_CLIENT_SECRET_FILE: path.join(dir, 'secret'),
      OAUTH_KEYCLOAK_NAME: 'Staff',
      OAUTH_KEYCLOAK_SCOPES: 'openid email',
      OAUTH_KEYCLOAK_RESPONSE_MODE: 'form_post',
      OAUTH_GHE_TYPE: 'github',
      OAUTH_GHE_URL: 'https://github.example.com/',
      OAUTH_GHE_API_URL: 'https://github.example.com/api/v3',
      OAUTH_GHE_CLIENT_ID: 'x',
      OAUTH_GHE_CLIENT_SECRET: 'y',
      OAUTH_REDIRECT_URLS: REDIRECTS,
    });
    expect(c.oauth.providers[0]).toMatchObject({ id: 'keycloak', type: 'oidc', issuer: 'https://sso.example.com/realms/staff', name: 'Staff', scopes: ['openid', 'email'], clientSecret: ' kc secret ', responseMode: 'form_post' });
    expect(c.oauth.providers[1]).toMatchObject({ id: 'ghe', type: 'github', name: 'ghe', issuer: 'https://github.example.com', apiUrl: 'https://github.example.com/api/v3' });
  });

  it('refuses to start, listing every problem: ids, types, missing settings, plain HTTP off loopback, two providers with one issuer, redirect URLs', () => {
    const found = problems({
      OAUTH_PROVIDERS: 'Google,google,google,acme,gh,pal,local,other',
      OAUTH_GOOGLE_CLIENT_ID: 'id',
      OAUTH_ACME_CLIENT_ID: 'id',
      OAUTH_ACME_CLIENT_SECRET: 's',
      OAUTH_GH_TYPE: 'gitlab',
      OAUTH_PAL_ISSUER: 'http://sso.example.com',
      OAUTH_PAL_CLIENT_ID: 'id',
      OAUTH_PAL_CLIENT_SECRET: 's',
      OAUTH_PAL_SCOPES: 'email',
      OAUTH_PAL_RESPONSE_MODE: 'fragment',
      OAUTH_LOCAL_ISSUER: 'http://127.0.0.1:9000',
      OAUTH_LOCAL_CLIENT_ID: 'id',
      OAUTH_LOCAL_CLIENT_SECRET: 's',
      OAUTH_OTHER_ISSUER: 'https://accounts.google.com/',
      OAUTH_OTHER_CLIENT_ID: 'id',
      OAUTH_OTHER_CLIENT_SECRET: 's',
    });
    const expected = [
      'OAUTH_PROVIDERS: "Google" is not a provider id',
      'OAUTH_PROVIDERS: "google" is listed twice',
      'OAUTH_GOOGLE_CLIENT_SECRET: required',
      'OAUTH_ACME_ISSUER: required for an oidc provider',
      'OAUTH_GH_TYPE: expected oidc or github, got "gitlab"',
      'OAUTH_PAL_ISSUER: http:// only for a loopback host',
      'OAUTH_PAL_SCOPES: an oidc provider needs the openid scope',
      'OAUTH_PAL_RESPONSE_MODE: expected query or form_post',
      'OAUTH_PROVIDERS: "google" and "other" have the same issuer',
      'OAUTH_REDIRECT_URLS: required when OAUTH_PROVIDERS is set',
    ];
    for (const problem of expected) expect(found.some((p) => p.startsWith(problem)), `${problem}\n${found.join('\n')}`).toBe(true);
    expect(found.some((p) => p.includes('OAUTH_LOCAL'))).toBe(false);
    expect(found).toHaveLength(expected.length);
  });

  it('refuses bad URLs: issuers and GitHub URLs with a query, a fragment or user info; redirect URLs that are relative or have a fragment, query or user info; PUBLIC_URL with a path', () => {
    expect(problems({ ...GOOGLE, OAUTH_PROVIDERS: 'x', OAUTH_X_ISSUER: 'https://a.example/?tenant=1', OAUTH_X_CLIENT_ID: 'i', OAUTH_X_CLIENT_SECRET: 's' })).toEqual([
      'OAUTH_X_ISSUER: expected a URL without a query or fragment, got "https://a.example/?tenant=1"',
    ]);
    expect(problems({ ...GOOGLE, OAUTH_PROVIDERS: 'github', OAUTH_GITHUB_URL: 'https://u:p@github.example', OAUTH_GITHUB_API_URL: 'ftp://x', OAUTH_GITHUB_CLIENT_ID: 'i', OAUTH_GITHUB_CLIENT_SECRET: 's' })).toHaveLength(2);
    for (const bad of ['/signed-in', 'https://app.example.com/#x', 'https://app.example.com/?a=1', 'https://u@app.example.com/', 'javascript:alert(1)']) {
      expect(problems({ ...GOOGLE, OAUTH_REDIRECT_URLS: bad }), bad).toHaveLength(1);
    }
    for (const bad of ['https://auth.example.com/auth', 'https://auth.example.com?x', 'auth.example.com']) expect(problems({ PUBLIC_URL: bad }), bad).toHaveLength(1);
    for (const bad of ['59', '86401', 'soon']) expect(problems({ REAUTH_MAX_AGE_SECONDS: bad }), bad).toEqual([expect.stringContaining('REAUTH_MAX_AGE_SECONDS')]);
  });

  it('never repeats a client secret in a problem, and refuses a secret given twice', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'oauth-config-'));
    writeFileSync(path.join(dir, 'secret'), 'from-file');
    const found = problems({ ...GOOGLE, OAUTH_GOOGLE_CLIENT_SECRET: 'the-real-secret-value', OAUTH_GOOGLE_CLIENT_SECRET_FILE: path.join(dir, 'secret'), OAUTH_GOOGLE_ISSUER: 'http://accounts.example.com' });
    expect(found).toHaveLength(2);
    expect(found.join('\n')).not.toContain('the-real-secret-value');
    expect(found.join('\n')).not.toContain('from-file');
  });
});

describe('redirectTarget (docs/api.md#redirect_to)', () => {
  const allowed = ['https://app.example.com/signed-in', 'https://app.example.com:8443/', 'http://localhost:5173/cb/'];
  it('accepts an entry, paths under it at a / boundary with a query; absent: the first entry', () => {
    expect(redirectTarget(undefined, allowed)).toBe('https://app.example.com/signed-in');
    expect(redirectTarget('https://app.example.com/signed-in', allowed)).toBe('https://app.example.com/signed-in');
    expect(redirectTarget('https://app.example.com/signed-in/next?a=1', allowed)).toBe('https://app.example.com/signed-in/next?a=1');
    expect(redirectTarget('https://app.example.com:8443/anything', allowed)).toBe('https://app.example.com:8443/anything');
    expect(redirectTarget('http://localhost:5173/cb/x', allowed)).toBe('http://localhost:5173/cb/x');
  });
  it('refuses another scheme, host or port, a path beside the entry, user info, fragments, dot segments that leave the path', () => {
    for (const bad of [
      'http://app.example.com/signed-in',
      'https://app.example.com.evil.example/signed-in',
      'https://app.example.com:444/signed-in',
      'https://app.example.com/signed-inx',
      'https://app.example.com/signed',
      'http://localhost:5173/cb',
      'https://a@app.example.com/signed-in',
      'https://@app.example.com/signed-in',
      'https://app.example.com/signed-in#',
      'https://app.example.com/signed-in/../admin',
      'https:app.example.com/signed-in/..%2f..%2fadmin',
      'not a url',
    ]) {
      expect(redirectTarget(bad, allowed), bad).toBeUndefined();
    }
  });
  it('withError sets error=<code>, replacing one the page had, keeping the rest', () => {
    expect(withError('https://app.example.com/signed-in?next=%2Fa&error=x', 'auth.oauth.provider_error')).toBe('https://app.example.com/signed-in?next=%2Fa&error=auth.oauth.provider_error');
  });
});

describe('derivedUsername (docs/api.md#sign-in-mode)', () => {
  it('lowercases, replaces every other character by _, cuts to 32, pads to 3 with digits; a suffix keeps within 32', () => {
    expect(derivedUsername('Octo-Cat.42')).toBe('octo_cat_42');
    expect(derivedUsername('Ünïcode Name')).toBe('_n_code_name');
    expect(derivedUsername('a'.repeat(40))).toBe('a'.repeat(32));
    expect(derivedUsername('Q')).toMatch(/^q\d\d$/);
    expect(derivedUsername('')).toMatch(/^\d{3}$/);
    expect(usernameWithSuffix('a'.repeat(32))).toMatch(/^a{27}_\d{4}$/);
    expect(usernameWithSuffix('bob')).toMatch(/^bob_\d{4}$/);
  });
});
