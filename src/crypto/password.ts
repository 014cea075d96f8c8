import { hash, verify } from '@node-rs/argon2';
import type { Argon2Params } from '../config.js';

/** `Algorithm.Argon2id` of @node-rs/argon2 (a const enum in its typings, so written out here). */
const ARGON2ID = 2;

/** Password length bounds in Unicode code points (spec §8, decisions.md §3). */
export const PASSWORD_MIN_CODE_POINTS = 8;
export const PASSWORD_MAX_CODE_POINTS = 72;

/**
 * NFKC-normalises a password (decisions.md §3; NIST SP 800-63B-4 §3.1.1.2). Never trims or truncates.
 * @returns the normalised password, or undefined when it falls outside 8 to 72 code points.
 */
export function normalizePassword(password: string): string | undefined {
  const normalized = password.normalize('NFKC');
  const length = [...normalized].length;
  return length >= PASSWORD_MIN_CODE_POINTS && length <= PASSWORD_MAX_CODE_POINTS ? normalized : undefined;
}

/** Hashes and verifies passwords with argon2id. */
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
}

/**
 * Builds an argon2id {@link PasswordHasher} with the given cost (OWASP minimum in production;
 * tests pass cheap parameters). Hashing runs on libuv's thread pool.
 */
export async function createPasswordHasher(params: Argon2Params): Promise<PasswordHasher> {
  const options = { algorithm: ARGON2ID, memoryCost: params.memoryCost, timeCost: params.timeCost, parallelism: params.parallelism };
  const hashPassword = (password: string): Promise<string> => hash(password, options);
  const verifyPassword = async (phc: string, password: string): Promise<boolean> => {
    try {
      return await verify(phc, password);
    } catch {
      return false;
    }
  };
  const dummyHash = await hashPassword('dummy password for unknown users');
  return {
    hash: hashPassword,
    verify: verifyPassword,
    async verifyDummy(password: string): Promise<void> {
      await verifyPassword(dummyHash, password);
    },
  };
}
