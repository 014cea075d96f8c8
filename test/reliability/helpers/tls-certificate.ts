import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** A self-signed certificate for 127.0.0.1 and its key, as PEM text and as files. */
export interface SelfSignedCertificate {
  readonly key: string;
  readonly cert: string;
  /** Path of the certificate file: what `SMTP_CA_FILE` names to trust it. */
  readonly certFile: string;
  readonly dir: string;
  remove(): void;
}

/** Validity of the test certificate: one day is far beyond any test run. */
const VALIDITY_DAYS = 1;

/**
 * Generates an RSA-2048 self-signed certificate for the IP address 127.0.0.1 (subjectAltName,
 * which Node checks instead of the CN) with the machine's `openssl` into a fresh temp dir.
 * Node's crypto makes keys but not certificates, so the test depends on `openssl` being present.
 * @throws when `openssl` is missing or fails.
 */
export function createSelfSignedCertificate(): SelfSignedCertificate {
  const dir = mkdtempSync(path.join(tmpdir(), 'auth-tls-'));
  const keyFile = path.join(dir, 'key.pem');
  const certFile = path.join(dir, 'cert.pem');
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', String(VALIDITY_DAYS),
      '-subj', '/CN=latchkey test SMTP', '-addext', 'subjectAltName=IP:127.0.0.1'],
    { stdio: 'pipe' },
  );
  return {
    key: readFileSync(keyFile, 'utf8'),
    cert: readFileSync(certFile, 'utf8'),
    certFile,
    dir,
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
