import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadKeyStore, type KeyStore } from '../../src/modules/keys/keys.service.js';

/**
 * A key store over a fresh RSA-2048 signing key, generated into a temporary folder as the
 * service generates its own when `JWT_PRIVATE_KEY_FILE` is unset, with no retired keys.
 * @param prefix the temporary folder's name prefix.
 */
export async function temporaryKeyStore(prefix: string): Promise<KeyStore> {
  return loadKeyStore({ privateKeyFile: undefined, publicKeyFiles: [], dataDir: mkdtempSync(path.join(tmpdir(), prefix)) });
}
