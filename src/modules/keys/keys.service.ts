import { createPrivateKey, createPublicKey, generateKeyPairSync, hkdfSync, randomBytes, type KeyObject } from 'node:crypto';
import { linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import { calculateJwkThumbprint, exportJWK } from 'jose';

/** Smallest RSA modulus accepted for RS256 signing keys (NIST SP 800-57; RFC 7518 §3.3 requires 2048). */
export const MIN_RSA_BITS = 2048;
/** File name of the generated development signing key inside DATA_DIR. */
export const GENERATED_KEY_FILE = 'jwt-signing-key.pem';
/** File name of the generated second-factor key inside DATA_DIR (when MFA_KEY_FILE is unset). */
export const GENERATED_MFA_KEY_FILE = 'mfa-key';
/** File name of the generated webhook key inside DATA_DIR (when WEBHOOK_KEY_FILE is unset). */
export const GENERATED_WEBHOOK_KEY_FILE = 'webhook-key';
/** HKDF `info` strings of the keys derived from the second-factor key. */
const TOTP_SECRET_INFO = 'latchkey/totp-secret-aes-256-gcm/v1';
const RECOVERY_CODE_INFO = 'latchkey/recovery-code-hmac/v1';
/** HKDF `info` string of the key that encrypts webhook signing secrets, derived from the webhook key. */
const WEBHOOK_SECRET_INFO = 'latchkey/webhook-secret-aes-256-gcm/v1';
/** Bytes of a generated HKDF source (MFA_KEY_FILE, WEBHOOK_KEY_FILE unset): 256 bits. */
const GENERATED_SOURCE_BYTES = 32;
/** HKDF `info` strings of the HMAC keys derived from the signing key (one key per purpose). */
// HKDF `info` labels keep the project's first name: changing them would change every derived
// key, invalidating outstanding verification codes and restarting every rate-limit window.
const CODE_HMAC_INFO = 'auth-service/verification-code-hmac/v1';
const RATE_LIMIT_HMAC_INFO = 'auth-service/rate-limit-subject-hmac/v1';
const ADMIN_CURSOR_HMAC_INFO = 'latchkey/admin-cursor-hmac/v1';
/** Length of each derived HMAC key in bytes: the SHA-256 block of output, 256 bits. */
const DERIVED_KEY_BYTES = 32;
/** Fewest bytes accepted in CODE_HMAC_KEY_FILE: 256 bits, the strength of the derived key (NIST SP 800-107 §5.3.4). */
export const MIN_CODE_HMAC_KEY_BYTES = 32;

/** The bytes of a CODE_HMAC_KEY_FILE: its content without one final line break (`openssl rand -base64 48 > file` writes one). */
function readCodeHmacKeyFile(file: string): Buffer {
  const bytes = readFileSync(file);
  const end = bytes.at(-1) === 0x0a ? (bytes.at(-2) === 0x0d ? bytes.length - 2 : bytes.length - 1) : bytes.length;
  return bytes.subarray(0, end);
}

/**
 * Why `file` cannot serve as CODE_HMAC_KEY_FILE, MFA_KEY_FILE or WEBHOOK_KEY_FILE (an HKDF
 * source of secret keys), or undefined when it can: readable, at least
 * {@link MIN_CODE_HMAC_KEY_BYTES} bytes.
 */
export function codeHmacKeyFileProblem(file: string): string | undefined {
  let bytes: Buffer;
  try {
    bytes = readCodeHmacKeyFile(file);
  } catch (err) {
    return `cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`;
  }
  return bytes.length < MIN_CODE_HMAC_KEY_BYTES ? `${file} holds ${bytes.length} bytes; at least ${MIN_CODE_HMAC_KEY_BYTES} random bytes are needed` : undefined;
}

/** One public RSA key that may verify access tokens, with its RFC 7638 thumbprint as `kid`. */
export interface VerificationKey {
  readonly kid: string;
  readonly key: KeyObject;
}

/** The signing key, every key that may verify a live token, and the prepared JWKS body. */
export interface KeyStore {
  readonly signing: { readonly kid: string; readonly privateKey: KeyObject };
  /** By `kid`: the active key and every retired key from JWT_PUBLIC_KEY_FILES. */
  readonly verification: ReadonlyMap<string, VerificationKey>;
  /** The serialised JWKS document (`{"keys":[...]}`), built once, served as is. */
  readonly jwksJson: string;
  /** HMAC key for one-time codes at rest, derived with HKDF-SHA-256 from CODE_HMAC_KEY_FILE, else from the signing key. */
  readonly codeHmacKey: Buffer;
  /** HMAC key for rate-limit subjects (addresses, identifiers), so the table holds no reversible hash of an address. */
  readonly rateLimitHmacKey: Buffer;
  /**
   * HMAC key of the admin API's pagination cursors, so that only cursors the service issued are
   * accepted (docs/admin-api.md#pagination); derived from the signing key like the rate-limit
   * key, so every instance that signs with one key accepts the others' cursors.
   */
  readonly adminCursorHmacKey: Buffer;
  /**
   * The second factor's keys (AES-256-GCM of TOTP secrets, HMAC-SHA-256 of recovery codes),
   * derived with HKDF-SHA-256 from MFA_KEY_FILE, else from a random key generated once into
   * DATA_DIR; never from the signing key, whose rotation must not make every TOTP secret
   * unreadable (docs/api.md#second-factor).
   */
  readonly mfa: { readonly totpSecretKey: Buffer; readonly recoveryCodeKey: Buffer };
  /** The AES-256-GCM key of webhook signing secrets at rest ({@link loadWebhookSecretKey}). */
  readonly webhookSecretKey: Buffer;
}

/** Where keys come from (README "Configuration"). */
export interface KeySources {
  /** PEM RSA private key; undefined: generated once into `dataDir`. */
  readonly privateKeyFile: string | undefined;
  /** PEM public keys of retired signing keys. */
  readonly publicKeyFiles: readonly string[];
  readonly dataDir: string;
  /** CODE_HMAC_KEY_FILE; undefined: the code key is derived from the signing key. */
  readonly codeHmacKeyFile?: string | undefined;
  /** MFA_KEY_FILE: the HKDF source of the second factor's keys; undefined: generated once into `dataDir`. */
  readonly mfaKeyFile?: string | undefined;
  /** WEBHOOK_KEY_FILE: the HKDF source of the key of webhook secrets; undefined: generated once into `dataDir`. */
  readonly webhookKeyFile?: string | undefined;
  /** Told, at info level, of each key file generated into `dataDir` (its path, never its content). */
  readonly log?: Pick<FastifyBaseLogger, 'info'> | undefined;
}

/** Generates an RSA key pair as PEM (PKCS#8 private, SPKI public). */
export function generateRsaKeyPair(bits = MIN_RSA_BITS): { privateKeyPem: string; publicKeyPem: string } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', {
    modulusLength: bits,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return { privateKeyPem: privateKey, publicKeyPem: publicKey };
}

/**
 * Reads the generated key file `name` from `dataDir`, creating it with `generate()` on first
 * use. Creation writes a temporary file and links it into place, so two processes starting at
 * once end up with the same key.
 * @returns the file's text, its path, and whether this call created it (false when it existed, or another process linked it first).
 */
function loadOrCreateGeneratedKey(
  dataDir: string,
  name: string = GENERATED_KEY_FILE,
  generate: () => string = () => generateRsaKeyPair().privateKeyPem,
): { text: string; file: string; created: boolean } {
  const file = path.join(dataDir, name);
  try {
    return { text: readFileSync(file, 'utf8'), file, created: false };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  mkdirSync(dataDir, { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, generate(), { mode: 0o600 });
  let created = true;
  try {
    linkSync(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    created = false;
  } finally {
    unlinkSync(tmp);
  }
  return { text: readFileSync(file, 'utf8'), file, created };
}

/**
 * Why a PEM file cannot serve as an RS256 key, or undefined when it can: readable, parseable,
 * RSA, and at least {@link MIN_RSA_BITS} bits. Used by keyFileProblems (keys.config.ts) to report key problems with
 * every other bad setting at start.
 */
export function rsaKeyFileProblem(file: string, kind: 'private' | 'public'): string | undefined {
  let key: KeyObject;
  try {
    const pem = readFileSync(file, 'utf8');
    key = kind === 'private' ? createPrivateKey(pem) : createPublicKey(pem);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return `cannot read ${file} as a PEM ${kind} key${code === undefined ? '' : ` (${code})`}`;
  }
  return rsaProblem(key, file);
}

function rsaProblem(key: KeyObject, source: string): string | undefined {
  const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
  return key.asymmetricKeyType !== 'rsa' || bits < MIN_RSA_BITS ? `${source}: expected an RSA key of at least ${MIN_RSA_BITS} bits` : undefined;
}

function assertRsa(key: KeyObject, source: string): void {
  const problem = rsaProblem(key, source);
  if (problem !== undefined) throw new Error(problem);
}

/**
 * The `kid` of a public key: its RFC 7638 JWK thumbprint (SHA-256, base64url, 43 characters).
 * The JWKS, the access-token header and `keys generate` all name a key by this value, so an
 * operator can match a key file to the JWKS entry.
 */
export async function kidOf(publicKey: KeyObject): Promise<string> {
  return calculateJwkThumbprint(await exportJWK(publicKey), 'sha256');
}

async function toVerificationKey(key: KeyObject): Promise<{ vk: VerificationKey; jwk: Record<string, unknown> }> {
  const jwk = await exportJWK(key);
  const kid = await kidOf(key);
  return { vk: { kid, key }, jwk: { kty: jwk.kty, kid, use: 'sig', alg: 'RS256', n: jwk.n, e: jwk.e } };
}

/**
 * {@link loadOrCreateGeneratedKey} for `sources.dataDir`, telling `sources.log` when it created
 * the file (where, and which setting would have named one instead): a first start says what it
 * did. Never the key itself.
 */
function generatedKey(sources: Pick<KeySources, 'dataDir' | 'log'>, key: { name: string; what: string; setting: string; generate?: () => string }): string {
  const { text, file, created } = loadOrCreateGeneratedKey(sources.dataDir, key.name, key.generate);
  if (created) sources.log?.info({ file }, `generated a ${key.what} into ${file} (${key.setting} is unset)`);
  return text;
}

/**
 * The HKDF source of a family of secret keys that must survive a change of signing key: the bytes
 * of `key.file` when the setting names one, else 32 random bytes (base64url) generated once into
 * `sources.dataDir` as `key.name`. Every instance on one database needs the same source.
 */
function keySource(sources: Pick<KeySources, 'dataDir' | 'log'>, key: { file: string | undefined; name: string; what: string; setting: string }): Buffer {
  if (key.file !== undefined) return readCodeHmacKeyFile(key.file);
  return Buffer.from(generatedKey(sources, { ...key, generate: () => `${randomBytes(GENERATED_SOURCE_BYTES).toString('base64url')}\n` }), 'utf8');
}

/** HKDF-SHA-256 (RFC 5869) of {@link DERIVED_KEY_BYTES} bytes from `source` with `info`, empty salt. */
function deriveKey(source: Buffer, info: string): Buffer {
  return Buffer.from(hkdfSync('sha256', source, Buffer.alloc(0), info, DERIVED_KEY_BYTES));
}

/**
 * The AES-256-GCM key of webhook signing secrets at rest (docs/security.md, "Webhooks"): derived
 * with HKDF-SHA-256 from WEBHOOK_KEY_FILE, else from a random key generated once into DATA_DIR
 * (`webhook-key`), as the second factor's key is; never from the signing key, whose rotation
 * must not make every endpoint's secret unreadable. The CLI (`latchkey webhooks`) loads it
 * alone, without the signing key.
 * @throws the file's read error.
 */
export function loadWebhookSecretKey(sources: Pick<KeySources, 'dataDir' | 'webhookKeyFile' | 'log'>): Buffer {
  const source = keySource(sources, { file: sources.webhookKeyFile, name: GENERATED_WEBHOOK_KEY_FILE, what: 'webhook key', setting: 'WEBHOOK_KEY_FILE' });
  return deriveKey(source, WEBHOOK_SECRET_INFO);
}

/**
 * Loads the signing key and the retired public keys, and prepares the JWKS (RFC 7517) with
 * public members only. `kid` is the RFC 7638 SHA-256 thumbprint, so it is stable across restarts.
 *
 * @throws Error naming the file when a key cannot be read or is not RSA-2048 or larger.
 */
export async function loadKeyStore(sources: KeySources): Promise<KeyStore> {
  const privatePem = sources.privateKeyFile === undefined ? generatedKey(sources, { name: GENERATED_KEY_FILE, what: 'signing key (RSA)', setting: 'JWT_PRIVATE_KEY_FILE' }) : readFileSync(sources.privateKeyFile, 'utf8');
  const privateKey = createPrivateKey(privatePem);
  assertRsa(privateKey, sources.privateKeyFile ?? GENERATED_KEY_FILE);
  const active = await toVerificationKey(createPublicKey(privateKey));

  const verification = new Map<string, VerificationKey>([[active.vk.kid, active.vk]]);
  const jwks = [active.jwk];
  for (const file of sources.publicKeyFiles) {
    const key = createPublicKey(readFileSync(file, 'utf8'));
    assertRsa(key, file);
    const retired = await toVerificationKey(key);
    if (verification.has(retired.vk.kid)) continue;
    verification.set(retired.vk.kid, retired.vk);
    jwks.push(retired.jwk);
  }
  const der = privateKey.export({ type: 'pkcs8', format: 'der' });
  const mfaKeySource = keySource(sources, { file: sources.mfaKeyFile, name: GENERATED_MFA_KEY_FILE, what: 'second-factor key', setting: 'MFA_KEY_FILE' });
  const derive = (info: string, source: Buffer = der): Buffer => deriveKey(source, info);
  return {
    signing: { kid: active.vk.kid, privateKey },
    verification,
    jwksJson: JSON.stringify({ keys: jwks }),
    codeHmacKey: sources.codeHmacKeyFile === undefined ? derive(CODE_HMAC_INFO) : derive(CODE_HMAC_INFO, readCodeHmacKeyFile(sources.codeHmacKeyFile)),
    rateLimitHmacKey: derive(RATE_LIMIT_HMAC_INFO),
    adminCursorHmacKey: derive(ADMIN_CURSOR_HMAC_INFO),
    mfa: { totpSecretKey: derive(TOTP_SECRET_INFO, mfaKeySource), recoveryCodeKey: derive(RECOVERY_CODE_INFO, mfaKeySource) },
    webhookSecretKey: loadWebhookSecretKey(sources),
  };
}
