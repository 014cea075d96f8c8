/** Longest `redirect_to` accepted, in characters: a page address, not a place to carry data. */
export const MAX_REDIRECT_LENGTH = 2048;

/** A percent-encoded `/` or `\` in a path. */
const ENCODED_SEPARATOR = /%(2f|5c)/i;

/**
 * Whether `path` lies under `base` at a `/` boundary: equal to it, or continuing it after a `/`
 * (`/app` admits `/app` and `/app/x`, never `/application`; `/` admits every path).
 */
function underPath(path: string, base: string): boolean {
  if (path === base) return true;
  return path.startsWith(base.endsWith('/') ? base : `${base}/`);
}

/** The authority part of an absolute URL as written (between `//` and the next `/`, `\`, `?` or `#`). */
function authorityOf(raw: string): string {
  const start = raw.indexOf('//');
  if (start === -1) return '';
  const rest = raw.slice(start + 2);
  const end = rest.search(/[/\\?#]/);
  return end === -1 ? rest : rest.slice(0, end);
}

/**
 * The page a flow returns to (docs/api.md#redirect_to): `raw` when it matches an entry of
 * OAUTH_REDIRECT_URLS, in the form a browser will follow (WHATWG URL serialisation, so the
 * address checked is the address used: dot segments resolved, `\` read as `/`); the first
 * entry when `raw` is absent. A match has the entry's scheme, host and port exactly, a path
 * under the entry's at a `/` boundary (without a percent-encoded `/` or `\`, which servers read
 * differently), and no user info and no fragment (not even an empty `#`).
 * Prefix matching on the text, which let `https://app.example.com.evil.example` or
 * `https://app.example.com@evil.example` through elsewhere, is never used.
 * @returns the URL to store with the flow, or undefined when `raw` matches no entry.
 */
export function redirectTarget(raw: string | undefined, allowed: readonly string[]): string | undefined {
  if (raw === undefined) return allowed[0];
  if (raw.length > MAX_REDIRECT_LENGTH || raw.includes('#')) return undefined;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return undefined;
  }
  // `https://@host` parses with an empty user name: any `@` in the authority is user info.
  if (url.username !== '' || url.password !== '' || authorityOf(raw).includes('@')) return undefined;
  // An encoded `/` or `\` is a path boundary or not depending on the app's server: refused.
  if (ENCODED_SEPARATOR.test(url.pathname)) return undefined;
  const fits = allowed.some((entry) => {
    const base = new URL(entry);
    return base.protocol === url.protocol && base.host === url.host && underPath(url.pathname, base.pathname);
  });
  return fits ? url.href : undefined;
}

/**
 * `redirectTo` with the query parameter `error=<code>` (a callback that failed,
 * docs/api.md#callback): set, replacing an `error` the page's address had; its other query
 * parameters are kept.
 */
export function withError(redirectTo: string, code: string): string {
  const url = new URL(redirectTo);
  url.searchParams.set('error', code);
  return url.href;
}
