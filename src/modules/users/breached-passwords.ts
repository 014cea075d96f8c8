import { createHash } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';

/**
 * Whether a password has appeared in a data breach (NIST SP 800-63B-4 §3.1.1.2: verifiers SHALL
 * compare new passwords against a list of values known to be compromised; OWASP ASVS 5.0
 * V6.2.12). Resolves true only for a positive answer; every failure to get one resolves false
 * (fail open, {@link createBreachedPasswordCheck}).
 *
 * @param password the password as it will be hashed (NFKC-normalised; normalised again here).
 */
export type BreachedPasswordCheck = (password: string) => Promise<boolean>;

/** How long the range query may take, headers and body together, before the check is skipped. */
export const BREACH_CHECK_TIMEOUT_MS = 2000;

/** Hex characters of the SHA-1 sent to the range API; the other 35 never leave the service. */
const PREFIX_LENGTH = 5;

/**
 * The k-anonymity range protocol of Have I Been Pwned's Pwned Passwords API: the SHA-1 of the
 * password (upper-case hex) is split into a 5-character prefix, sent as `GET <apiUrl><prefix>`,
 * and a 35-character suffix, looked for in the answer's `SUFFIX:COUNT` lines. With
 * `Add-Padding: true` the answer also holds random suffixes with count 0 so that its size does
 * not tell which prefix was asked for; they are ignored. Only the prefix leaves the service,
 * shared by hundreds of breached and unbreached passwords.
 *
 * Fails open: on a timeout ({@link BREACH_CHECK_TIMEOUT_MS}), a network error or an answer other
 * than 200 the password is accepted and one warning logged, which names the failure only (never
 * the password, its hash, the prefix or the suffix). A password policy that depends on a third
 * party must not stop sign-ups and password changes while that party is unreachable; the local
 * policy rules still apply.
 *
 * @param deps.apiUrl the range endpoint, ending in `/` (PASSWORD_BREACH_API_URL).
 * @param deps.log where the fail-open warning goes.
 * @param deps.timeoutMs tests only; defaults to {@link BREACH_CHECK_TIMEOUT_MS}.
 */
export function createBreachedPasswordCheck(deps: { apiUrl: string; log: FastifyBaseLogger; timeoutMs?: number }): BreachedPasswordCheck {
  const { apiUrl, log } = deps;
  const timeoutMs = deps.timeoutMs ?? BREACH_CHECK_TIMEOUT_MS;
  return async (password) => {
    const digest = createHash('sha1').update(password.normalize('NFKC'), 'utf8').digest('hex').toUpperCase();
    const prefix = digest.slice(0, PREFIX_LENGTH);
    const suffix = digest.slice(PREFIX_LENGTH);
    let body: string;
    try {
      const res = await fetch(`${apiUrl}${prefix}`, {
        headers: { 'add-padding': 'true' },
        signal: AbortSignal.timeout(timeoutMs),
        redirect: 'error',
      });
      if (res.status !== 200) {
        await res.body?.cancel().catch(() => undefined);
        log.warn({ failure: 'status', status: res.status }, 'breached-password check unavailable: the range API answered other than 200; password accepted without it');
        return false;
      }
      const read = await readCapped(res, MAX_RANGE_RESPONSE_BYTES);
      if (read === undefined) {
        log.warn({ failure: 'too_large' }, `breached-password check unavailable: the range answer exceeds ${MAX_RANGE_RESPONSE_BYTES} bytes; password accepted without it`);
        return false;
      }
      body = read;
    } catch (err) {
      const failure = err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError') ? 'timeout' : 'network';
      log.warn({ failure }, `breached-password check unavailable: ${failure === 'timeout' ? `no answer within ${timeoutMs} ms` : 'the range API could not be reached'}; password accepted without it`);
      return false;
    }
    return appearsIn(body, suffix);
  };
}

/** Longest range answer read, in bytes (a padded answer is well under half of it); a longer one is not read further. */
export const MAX_RANGE_RESPONSE_BYTES = 64 * 1024;

/** The body of `res` as UTF-8, or undefined (the rest cancelled) once it exceeds `limit` bytes. */
async function readCapped(res: Response, limit: number): Promise<string | undefined> {
  if (res.body === null) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > limit) {
      await reader.cancel().catch(() => undefined);
      return undefined;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Whether `suffix` is listed in a range answer with a count above 0 (padding lines have count 0). */
function appearsIn(body: string, suffix: string): boolean {
  for (const line of body.split('\n')) {
    const colon = line.indexOf(':');
    if (colon === -1) continue;
    if (line.slice(0, colon).trim().toUpperCase() !== suffix) continue;
    const count = Number.parseInt(line.slice(colon + 1).trim(), 10);
    if (Number.isFinite(count) && count > 0) return true;
  }
  return false;
}
