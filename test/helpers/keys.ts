import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadKeyStore, type KeyStore } from '../../src/modules/keys/keys.service.js';

/**
 * A key store over a fresh RSA-2048 signing key written to a temporary folder (mode 0600), as
 * `JWT_PRIVATE_KEY_FILE` would name it, with no retired keys.
 * @param prefix the temporary folder's name prefix.
 */
export async function temporaryKeyStore(prefix: string): Promise<KeyStore> {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  const keyFile = path.join(dir, 'signing.pem');
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048, privateKeyEncoding: { type: 'pkcs8', format: 'pem' }, publicKeyEncoding: { type: 'spki', format: 'pem' } });
  writeFileSync(keyFile, privateKey, { mode: 0o600 });
  return loadKeyStore({ privateKeyFile: keyFile, publicKeyFiles: [], dataDir: dir });
}
