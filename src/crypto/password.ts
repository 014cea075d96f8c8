import { availableParallelism } from 'node:os';
import { hash, verify } from '@node-rs/argon2';
import type { Argon2Params } from '../config.js';

/** `Algorithm.Argon2id` of @node-rs/argon2 (a const enum in its typings, so written out here). */
const ARGON2ID = 2;

/** Password length bounds in Unicode code points (docs/api.md#rules, docs/api.md#identifiers). */
export const PASSWORD_MIN_CODE_POINTS = 8;
export const PASSWORD_MAX_CODE_POINTS = 72;

/**
 * NFKC-normalises a password (docs/api.md#identifiers; NIST SP 800-63B-4 §3.1.1.2). Never trims or truncates.
 * @returns the normalised password, or undefined when it falls outside 8 to 72 code points.
 */
export function normalizePassword(password: string): string | undefined {
  const normalized = password.normalize('NFKC');
  const length = [...normalized].length;
  return length >= PASSWORD_MIN_CODE_POINTS && length <= PASSWORD_MAX_CODE_POINTS ? normalized : undefined;
}

/** Hashes and verifies passwords with argon2id, and tells which stored hashes are due for an upgrade. */
export interface PasswordHasher {
  /** @returns a PHC string (`$argon2id$v=19$m=..,t=..,p=..$salt$hash`) with a fresh random salt. */
  hash(password: string): Promise<string>;
  /** Constant-time check of `password` against a PHC string; false (never throws) for a malformed hash. */
  verify(phc: string, password: string): Promise<boolean>;
  /**
   * Spends the same time as a real {@link verify} against a hash with the current parameters.
   * Used for unknown users so timing does not reveal who exists (ASVS 5.0 V6.3; Better Auth's dummy hash).
   */
  verifyDummy(password: string): Promise<void>;
  /**
   * Whether a stored PHC string should be replaced by a fresh hash with the current parameters:
   * true when its algorithm is not argon2id, its version is not 1.3 (`v=19`), its `m`, `t` or `p`
   * is below the configured one, or it cannot be parsed. Call it only after {@link verify}
   * succeeded, since the new hash needs the plaintext (OWASP Password Storage
   * Cheat Sheet: the work factor is raised over time and hashes are upgraded at the next login).
   * Never throws; costs no hashing.
   */
  needsRehash(phc: string): boolean;
}

/** argon2 version 1.3 (0x13), the only one @node-rs/argon2 writes (RFC 9106 §3.1). */
const ARGON2_VERSION_1_3 = 19;

/** The header of an argon2 PHC string, as far as {@link PasswordHasher.needsRehash} needs it. */
interface Argon2PhcHeader {
  readonly algorithm: string;
  readonly version: number;
  readonly memoryCost: number;
  readonly timeCost: number;
  readonly parallelism: number;
}

/**
 * `$<algorithm>$v=<version>$<params>$<salt>$<hash>` (PHC string format as the argon2 reference
 * implementation writes it); salt and hash are unpadded base64.
 */
const ARGON2_PHC = /^\$(argon2(?:id|i|d))\$v=(\d{1,10})\$([a-z]+=[^$,]+(?:,[a-z]+=[^$,]+)*)\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+$/;

/**
 * Parses the algorithm, version and `m` (KiB), `t` (passes), `p` (lanes) of an argon2 PHC
 * string. Parameters may come in any order; others (`keyid`, `data`) are ignored.
 * @returns undefined when the string is not such a PHC string or lacks m, t or p.
 */
function parseArgon2Phc(phc: string): Argon2PhcHeader | undefined {
  const match = ARGON2_PHC.exec(phc);
  if (match === null) return undefined;
  const params = new Map<string, number>();
  for (const pair of match[3]!.split(',')) {
    const [key, value] = pair.split('=') as [string, string];
    if (/^\d{1,10}$/.test(value)) params.set(key, Number(value));
  }
  const memoryCost = params.get('m');
  const timeCost = params.get('t');
  const parallelism = params.get('p');
  if (memoryCost === undefined || timeCost === undefined || parallelism === undefined) return undefined;
  return { algorithm: match[1]!, version: Number(match[2]), memoryCost, timeCost, parallelism };
}

/**
 * How many argon2id hashes or verifications run at once by default: one per CPU core
 * (`os.availableParallelism()`). The work is CPU-bound, so more in flight add no throughput
 * (on 2 cores, 2, 3 and 4 parallel hashes ran at the same rate, docs/performance.md), while each
 * holds `memoryCost` KiB (19 MiB at OWASP's minimum) and slows the others down; further calls
 * wait their turn in order. They run on libuv's thread pool, whose size (UV_THREADPOOL_SIZE, 4
 * by default) caps this number: on machines with more than 4 cores, set it to the core count.
 */
export function argon2Concurrency(): number {
  return availableParallelism();
}

/** Runs at most `max` of the given tasks at once; the others start in call order as slots free up. */
function concurrencyLimit(max: number): <T>(task: () => Promise<T>) => Promise<T> {
  let running = 0;
  const waiting: (() => void)[] = [];
  const release = (): void => {
    const next = waiting.shift();
    if (next === undefined) running--;
    else next(); // the slot passes straight to the next caller
  };
  return async (task) => {
    if (running < max) running++;
    else await new Promise<void>((resolve) => waiting.push(resolve));
    try {
      return await task();
    } finally {
      release();
    }
  };
}

/**
 * Builds an argon2id {@link PasswordHasher} with the given cost (OWASP minimum in production;
 * tests pass cheap parameters). Hashing runs on libuv's thread pool, at most
 * `options.concurrency` ({@link argon2Concurrency} by default) at a time. The dummy hash for
 * unknown users is computed in the background from the start; the first such sign-in waits for it.
 */
export async function createPasswordHasher(params: Argon2Params, options: { readonly concurrency?: number } = {}): Promise<PasswordHasher> {
  const argon2Options = { algorithm: ARGON2ID, memoryCost: params.memoryCost, timeCost: params.timeCost, parallelism: params.parallelism };
  const limit = concurrencyLimit(options.concurrency ?? argon2Concurrency());
  const hashPassword = (password: string): Promise<string> => limit(() => hash(password, argon2Options));
  const verifyPassword = async (phc: string, password: string): Promise<boolean> => {
    try {
      return await limit(() => verify(phc, password));
    } catch {
      return false;
    }
  };
  const dummyHash = hashPassword('dummy password for unknown users');
  // Never fails in practice; if it did, the first unknown-user sign-in would answer 500.
  dummyHash.catch(() => undefined);
  return {
    hash: hashPassword,
    verify: verifyPassword,
    async verifyDummy(password: string): Promise<void> {
      await verifyPassword(await dummyHash, password);
    },
    needsRehash(phc: string): boolean {
      const header = parseArgon2Phc(phc);
      return (
        header === undefined ||
        header.algorithm !== 'argon2id' ||
        header.version !== ARGON2_VERSION_1_3 ||
        header.memoryCost < params.memoryCost ||
        header.timeCost < params.timeCost ||
        header.parallelism < params.parallelism
      );
    },
  };
}
