import { createPrivateKey, createPublicKey, generateKeyPair } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, fchmodSync, mkdirSync, openSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { kidOf, MIN_RSA_BITS } from './keys.service.js';

const generateKeyPairAsync = promisify(generateKeyPair);

/** Folder inside DATA_DIR where `keys generate` writes by default. */
export const KEYS_SUBDIR = 'keys';
/** DATA_DIR when unset, as the service has it (README): `./data`, which `.gitignore` ignores. */
const DEFAULT_DATA_DIR = './data';
/** Exit codes of the command: usage errors are 2, as for every other command. */
const EXIT_USAGE = 2;
const EXIT_FAILED = 1;
/**
 * Largest modulus `keys generate` accepts. 8192 bits is far beyond any current recommendation;
 * larger keys take minutes to generate and make every token signature and verification slower.
 */
export const MAX_GENERATED_RSA_BITS = 8192;
/** File names: `<kid>.key.pem` (private, PKCS#8) and `<kid>.pub.pem` (public, SPKI). */
export const PRIVATE_KEY_SUFFIX = '.key.pem';
export const PUBLIC_KEY_SUFFIX = '.pub.pem';
/** The private key is readable by its owner only; the public key by everyone; a created folder by its owner only. */
const PRIVATE_KEY_MODE = 0o600;
const PUBLIC_KEY_MODE = 0o644;
const KEYS_DIR_MODE = 0o700;

/** What {@link generateKeyFiles} and {@link writeKeyFiles} wrote. Paths are absolute. */
export interface GeneratedKeyFiles {
  /** RFC 7638 thumbprint of the public key: the `kid` the JWKS and access tokens will carry. */
  readonly kid: string;
  /** Modulus length in bits. */
  readonly bits: number;
  /** `<outDir>/<kid>.key.pem`, PKCS#8 PEM, mode 0600: the value for JWT_PRIVATE_KEY_FILE. */
  readonly privateKeyFile: string;
  /** `<outDir>/<kid>.pub.pem`, SPKI PEM, mode 0644: an entry for JWT_PUBLIC_KEY_FILES. */
  readonly publicKeyFile: string;
}

/** Thrown instead of overwriting an existing key file; names the file. Nothing is written. */
export class KeyFileExistsError extends Error {
  constructor(readonly file: string) {
    super(`${file} already exists; refusing to overwrite it`);
    this.name = 'KeyFileExistsError';
  }
}

/**
 * Why `bits` cannot be used by `keys generate`, or undefined when it can: an integer from
 * {@link MIN_RSA_BITS} (RFC 7518 §3.3, the service refuses smaller keys) to
 * {@link MAX_GENERATED_RSA_BITS}.
 */
export function keyBitsProblem(bits: number): string | undefined {
  return Number.isInteger(bits) && bits >= MIN_RSA_BITS && bits <= MAX_GENERATED_RSA_BITS
    ? undefined
    : `expected an integer from ${MIN_RSA_BITS} to ${MAX_GENERATED_RSA_BITS}, got ${bits}`;
}

/** Creates `file` exclusively (O_EXCL) with exactly `mode` (umask does not apply), and writes `text`. */
function writeExclusive(file: string, text: string, mode: number): void {
  let fd: number;
  try {
    fd = openSync(file, 'wx', mode);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new KeyFileExistsError(file);
    throw err;
  }
  try {
    fchmodSync(fd, mode);
    writeFileSync(fd, text, 'utf8');
  } finally {
    closeSync(fd);
  }
}

/**
 * Writes an existing RSA private key and its public key into `outDir` as `<kid>.key.pem` (PKCS#8,
 * mode 0600) and `<kid>.pub.pem` (SPKI, mode 0644), creating `outDir` (mode 0700) when missing.
 * Never overwrites: when either file exists, nothing is written (both files are created with
 * O_EXCL, and a half-written pair is removed).
 *
 * @param privateKeyPem a PEM RSA private key (PKCS#1 or PKCS#8) of at least {@link MIN_RSA_BITS} bits.
 * @throws {KeyFileExistsError} when `<kid>.key.pem` or `<kid>.pub.pem` exists.
 * @throws Error when the key is not RSA or too small, or the folder cannot be written.
 */
export async function writeKeyFiles(outDir: string, privateKeyPem: string): Promise<GeneratedKeyFiles> {
  const privateKey = createPrivateKey(privateKeyPem);
  const bits = privateKey.asymmetricKeyDetails?.modulusLength ?? 0;
  if (privateKey.asymmetricKeyType !== 'rsa' || bits < MIN_RSA_BITS) {
    throw new Error(`expected an RSA private key of at least ${MIN_RSA_BITS} bits`);
  }
  const publicKey = createPublicKey(privateKey);
  const kid = await kidOf(publicKey);
  const dir = path.resolve(outDir);
  const privateKeyFile = path.join(dir, `${kid}${PRIVATE_KEY_SUFFIX}`);
  const publicKeyFile = path.join(dir, `${kid}${PUBLIC_KEY_SUFFIX}`);
  for (const file of [privateKeyFile, publicKeyFile]) if (existsSync(file)) throw new KeyFileExistsError(file);

  mkdirSync(dir, { recursive: true, mode: KEYS_DIR_MODE });
  writeExclusive(privateKeyFile, privateKey.export({ type: 'pkcs8', format: 'pem' }) as string, PRIVATE_KEY_MODE);
  try {
    writeExclusive(publicKeyFile, publicKey.export({ type: 'spki', format: 'pem' }) as string, PUBLIC_KEY_MODE);
  } catch (err) {
    unlinkSync(privateKeyFile);
    throw err;
  }
  return { kid, bits, privateKeyFile, publicKeyFile };
}

/**
 * Generates a new RSA key pair for RS256 signing and writes it with {@link writeKeyFiles}. The
 * file names carry the key's `kid` (RFC 7638 thumbprint), the same value the JWKS will publish,
 * so a key file and its JWKS entry can be matched. See docs/key-rotation.md for how to put the
 * files to use.
 *
 * @param options.outDir folder to write into; created (mode 0700) when missing.
 * @param options.bits modulus length in bits, default {@link MIN_RSA_BITS}; see {@link keyBitsProblem}.
 * @throws RangeError for a bad `bits`; {@link KeyFileExistsError} instead of overwriting a file.
 */
export async function generateKeyFiles(options: { outDir: string; bits?: number }): Promise<GeneratedKeyFiles> {
  const bits = options.bits ?? MIN_RSA_BITS;
  const problem = keyBitsProblem(bits);
  if (problem !== undefined) throw new RangeError(`bits: ${problem}`);
  const { privateKey } = await generateKeyPairAsync('rsa', {
    modulusLength: bits,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return writeKeyFiles(options.outDir, privateKey);
}

/** `keys generate` writes here unless `--out` says otherwise: `DATA_DIR/keys` (`./data/keys` without DATA_DIR). */
export function defaultKeysDir(env: Readonly<Record<string, string | undefined>>): string {
  const dataDir = env.DATA_DIR?.trim();
  return path.resolve(dataDir === undefined || dataDir === '' ? DEFAULT_DATA_DIR : dataDir, KEYS_SUBDIR);
}

/**
 * Whether git would commit a file at `file` with `git add .`: it lies inside a git work tree and
 * no ignore rule covers it (`git check-ignore`, run from the nearest existing folder above it).
 * False when git is not installed or the folder is in no work tree: nothing would commit it.
 * A private key must never land there (OWASP ASVS 5.0 V13.3.1: secrets are not in source code).
 */
export function wouldGitCommit(file: string): boolean {
  let dir = path.dirname(path.resolve(file));
  while (!existsSync(dir)) dir = path.dirname(dir);
  const inTree = spawnSync('git', ['rev-parse', '--is-inside-work-tree'], { cwd: dir, encoding: 'utf8' });
  if (inTree.error !== undefined || inTree.status !== 0 || inTree.stdout.trim() !== 'true') return false;
  // Exit 0: ignored; 1: not ignored; anything else (an error): assume the worst.
  return spawnSync('git', ['check-ignore', '--quiet', '--no-index', path.resolve(file)], { cwd: dir }).status !== 0;
}

export const KEYS_USAGE = `Usage: latchkey keys generate [--out DIR] [--bits N]

Writes a new RSA key pair for signing access tokens (RS256):
  DIR/<kid>.key.pem   private key, PKCS#8 PEM, mode 0600 (for JWT_PRIVATE_KEY_FILE)
  DIR/<kid>.pub.pem   public key, SPKI PEM (for JWT_PUBLIC_KEY_FILES)
and prints both paths and the kid (the key's RFC 7638 thumbprint, as the JWKS will show it).
Existing files are never overwritten.

Options:
  --out DIR   output folder, created when missing (default: DATA_DIR/keys, that is ./data/keys
              when DATA_DIR is unset); refused when it is inside a git work tree and not ignored
  --bits N    RSA modulus length, ${MIN_RSA_BITS} to ${MAX_GENERATED_RSA_BITS} (default: ${MIN_RSA_BITS})
  -h, --help  show this help

Rotating the signing key: publish the new public key first, sign with it 300 s later.
See docs/key-rotation.md.
`;

/** Where {@link runKeysCommand} reads its environment and writes its output. */
export interface CommandIo {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
}

/**
 * `latchkey keys <subcommand>`; only `generate` exists (see {@link KEYS_USAGE}).
 *
 * @param argv the arguments after `keys`.
 * @returns the process exit code: 0 on success or help, 2 on a usage error, 1 when a file exists
 *   or the folder is one git would commit.
 * @throws only for unexpected failures (an unwritable folder, for example).
 */
export async function runKeysCommand(argv: readonly string[], io: CommandIo): Promise<number> {
  const [subcommand, ...rest] = argv;
  if (subcommand === '--help' || subcommand === '-h' || subcommand === 'help') {
    io.stdout(KEYS_USAGE);
    return 0;
  }
  if (subcommand !== 'generate') {
    io.stderr(`${subcommand === undefined ? 'Missing subcommand' : `Unknown subcommand "${subcommand}"`}.\n${KEYS_USAGE}`);
    return EXIT_USAGE;
  }
  let values: { out?: string | undefined; bits?: string | undefined; help?: boolean | undefined };
  try {
    values = parseArgs({
      args: [...rest],
      options: { out: { type: 'string' }, bits: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (err) {
    io.stderr(`${(err as Error).message}\n${KEYS_USAGE}`);
    return EXIT_USAGE;
  }
  if (values.help === true) {
    io.stdout(KEYS_USAGE);
    return 0;
  }
  let bits = MIN_RSA_BITS;
  if (values.bits !== undefined) {
    const problem = /^\d+$/.test(values.bits) ? keyBitsProblem(Number(values.bits)) : `expected an integer, got "${values.bits}"`;
    if (problem !== undefined) {
      io.stderr(`--bits: ${problem}\n`);
      return EXIT_USAGE;
    }
    bits = Number(values.bits);
  }
  if (values.out !== undefined && values.out.trim() === '') {
    io.stderr('--out: expected a folder\n');
    return EXIT_USAGE;
  }
  const outDir = values.out === undefined ? defaultKeysDir(io.env) : path.resolve(values.out);
  if (wouldGitCommit(path.join(outDir, `new${PRIVATE_KEY_SUFFIX}`))) {
    io.stderr(
      `${outDir} is inside a git work tree and not ignored: "git add ." would commit the private key. ` +
        'Choose a folder outside the repository (--out), or one that .gitignore covers (the default, DATA_DIR/keys, is under ./data).\n',
    );
    return EXIT_FAILED;
  }
  try {
    const written = await generateKeyFiles({ outDir, bits });
    io.stdout(
      `Generated an RSA-${written.bits} key pair.\n` +
        `kid          ${written.kid}\n` +
        `private key  ${written.privateKeyFile}\n` +
        `public key   ${written.publicKeyFile}\n` +
        'Publish the public key (JWT_PUBLIC_KEY_FILES) on every instance at least 300 s before signing with the private key; see docs/key-rotation.md.\n',
    );
    return 0;
  } catch (err) {
    if (err instanceof KeyFileExistsError) {
      io.stderr(`${err.message}\n`);
      return EXIT_FAILED;
    }
    throw err;
  }
}
