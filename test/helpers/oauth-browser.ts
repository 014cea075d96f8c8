import type { TestContext } from './context.js';

/** One stored cookie (RFC 6265, what these tests need of it: host, path, expiry by Max-Age=0). */
interface JarCookie {
  origin: string;
  name: string;
  value: string;
  path: string;
}

/** A response as the browser sees it. */
export interface BrowserResponse {
  readonly url: string;
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
  /** The Set-Cookie lines of the response, raw. */
  readonly setCookies: string[];
}

/** Undoes the HTML escaping of an attribute value. */
function unescapeHtml(text: string): string {
  return text
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&#x2F;/gi, '/')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
}

/** The first `<form method="post">` of a page: its action and hidden inputs. */
export function postForm(html: string): { action: string; fields: [string, string][] } | undefined {
  const form = /<form[^>]*>[\s\S]*?<\/form>/i.exec(html)?.[0];
  if (form === undefined || !/method="post"/i.test(form)) return undefined;
  const action = /action="([^"]*)"/i.exec(form)?.[1];
  if (action === undefined) return undefined;
  const fields: [string, string][] = [];
  for (const input of form.matchAll(/<input[^>]*type="hidden"[^>]*>/gi)) {
    const name = /name="([^"]*)"/i.exec(input[0])?.[1];
    const value = /value="([^"]*)"/i.exec(input[0])?.[1] ?? '';
    if (name !== undefined) fields.push([unescapeHtml(name), unescapeHtml(value)]);
  }
  return { action: unescapeHtml(action), fields };
}

/**
 * A browser for the identity-provider tests, driven over HTTP: it keeps cookies per origin and
 * path, sends requests to the service (`PUBLIC_URL`) through `app.inject` (the same app and
 * Ajv options as production) and every other request to the real servers on 127.0.0.1, and
 * follows redirects by hand. On the OpenID Provider's development pages it signs in as the
 * account it is told (any password) and consents; a `form_post` page is submitted as its
 * script would.
 */
export class TestBrowser {
  private jar: JarCookie[] = [];
  /** The URL {@link navigate} stopped before, when `stopBefore` said so. */
  stoppedAt: string | undefined;

  constructor(
    private readonly ctx: TestContext,
    private readonly publicUrl: string,
  ) {}

  /** Sets a cookie as if a site had set it earlier (the account the test GitHub or provider is "signed in" as). */
  setCookie(origin: string, name: string, value: string, path = '/'): void {
    this.jar = this.jar.filter((c) => !(c.origin === origin && c.name === name && c.path === path));
    this.jar.push({ origin, name, value, path });
  }

  /** The value of cookie `name` of `origin` (any path), or undefined. */
  cookie(origin: string, name: string): string | undefined {
    return this.jar.find((c) => c.origin === origin && c.name === name)?.value;
  }

  /** Forgets every cookie of `origin` named `name` (the browser lost it, or another browser). */
  dropCookie(origin: string, name: string): void {
    this.jar = this.jar.filter((c) => !(c.origin === origin && c.name === name));
  }

  private cookieHeader(url: URL): string | undefined {
    const sent = this.jar.filter((c) => c.origin === url.origin && (url.pathname === c.path || url.pathname.startsWith(c.path.endsWith('/') ? c.path : `${c.path}/`)));
    return sent.length === 0 ? undefined : sent.map((c) => `${c.name}=${c.value}`).join('; ');
  }

  private store(url: URL, lines: string[]): void {
    for (const line of lines) {
      const [pair, ...attrs] = line.split(';').map((s) => s.trim());
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq);
      const value = pair!.slice(eq + 1);
      const path = attrs.find((a) => a.toLowerCase().startsWith('path='))?.slice(5) ?? '/';
      const gone = attrs.some((a) => /^max-age=0$/i.test(a)) || value === '';
      this.jar = this.jar.filter((c) => !(c.origin === url.origin && c.name === name && c.path === path));
      if (!gone) this.jar.push({ origin: url.origin, name, value, path });
    }
  }

  /** One request, no redirect followed; cookies sent and stored. */
  async request(target: string, init: { method?: 'GET' | 'POST'; form?: [string, string][]; headers?: Record<string, string> } = {}): Promise<BrowserResponse> {
    const url = new URL(target);
    const method = init.method ?? 'GET';
    const body = init.form === undefined ? undefined : new URLSearchParams(init.form).toString();
    const cookie = this.cookieHeader(url);
    const headers: Record<string, string> = {
      ...(cookie === undefined ? {} : { cookie }),
      ...(body === undefined ? {} : { 'content-type': 'application/x-www-form-urlencoded' }),
      ...init.headers,
    };
    let out: BrowserResponse;
    if (url.origin === new URL(this.publicUrl).origin) {
      const res = await this.ctx.app.inject({ method, url: `${url.pathname}${url.search}`, headers, ...(body === undefined ? {} : { payload: body }) });
      const raw = res.headers['set-cookie'];
      out = { url: url.href, status: res.statusCode, headers: res.headers as BrowserResponse['headers'], body: res.body, setCookies: raw === undefined ? [] : Array.isArray(raw) ? raw : [raw] };
    } else {
      const res = await fetch(url, { method, headers, body, redirect: 'manual' });
      out = { url: url.href, status: res.status, headers: Object.fromEntries(res.headers.entries()), body: await res.text(), setCookies: res.headers.getSetCookie() };
    }
    this.store(url, out.setCookies);
    return out;
  }

  /**
   * Goes to `start` and on, following redirects and submitting the provider's pages (signing in
   * as `account`), until a response that is not one of those: the callback's 303 to the app
   * page, a JSON error, or a provider's own error page; or until the next URL is one
   * `stopBefore` names (then {@link stoppedAt} holds it, and it is not requested).
   * @returns every response on the way; the last is where it stopped.
   */
  async navigate(start: string, options: { account?: string; stopBefore?: (url: URL) => boolean } = {}): Promise<BrowserResponse[]> {
    const seen: BrowserResponse[] = [];
    let next: { url: string; method?: 'GET' | 'POST'; form?: [string, string][] } | undefined = { url: start };
    for (let hop = 0; hop < 20 && next !== undefined; hop++) {
      if (options.stopBefore?.(new URL(next.url)) === true) {
        this.stoppedAt = next.url;
        break;
      }
      const res = await this.request(next.url, { method: next.method ?? 'GET', ...(next.form === undefined ? {} : { form: next.form }) });
      seen.push(res);
      next = undefined;
      const location = typeof res.headers.location === 'string' ? new URL(res.headers.location, res.url).href : undefined;
      if (location !== undefined && res.status >= 300 && res.status < 400) {
        // The flow ends at the app's page: a redirect from the service outside its own paths.
        const fromService = new URL(res.url).origin === new URL(this.publicUrl).origin;
        const toService = new URL(location).origin === new URL(this.publicUrl).origin && new URL(location).pathname.startsWith('/auth/v0/');
        if (fromService && !toService && new URL(res.url).pathname.includes('/callback')) break;
        next = { url: location };
        continue;
      }
      if (res.status !== 200 || !/<form/i.test(res.body)) break;
      const form = postForm(res.body);
      if (form === undefined) break;
      const action = new URL(form.action, res.url).href;
      const prompt = form.fields.find(([name]) => name === 'prompt')?.[1];
      if (prompt === 'login') next = { url: action, method: 'POST', form: [...form.fields, ['login', options.account ?? 'alice'], ['password', 'any password']] };
      else next = { url: action, method: 'POST', form: form.fields };
    }
    return seen;
  }
}
