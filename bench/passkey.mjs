// A software passkey for the benchmark's `passkey` scenario (bench/lib.mjs): ES256 credentials
// with `none` attestation, made and used the way a browser and its authenticator do
// (W3C WebAuthn Level 3 §6.1, §6.5.1), for the origin and RP ID the benchmark's service is
// configured with (WEBAUTHN_ORIGINS and WEBAUTHN_RP_ID). Its signature counter
// stays 0, as synced passkeys keep none, so requests of one credential may run in parallel.
import { createHash, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { isoCBOR } from '@simplewebauthn/server/helpers';

/** The WEBAUTHN_ORIGINS the benchmark sets (bench/lib.mjs serviceEnv) and the default WEBAUTHN_RP_ID. */
export const BENCH_ORIGIN = 'http://localhost:3000';
const RP_ID_HASH = createHash('sha256').update('localhost').digest();
/** Authenticator data flags: user present (0x01), user verified (0x04), attested credential data (0x40). */
const FLAGS_ASSERTION = 0x05;
const FLAGS_REGISTRATION = 0x45;
/** COSE_Key labels and values of an EC2 P-256 ES256 key (RFC 9052 §7, RFC 9053 §7.1). */
const COSE_EC2_P256_ES256 = [[1, 2], [3, -7], [-1, 1]];

const clientData = (type, challenge) => Buffer.from(JSON.stringify({ type, challenge, origin: BENCH_ORIGIN, crossOrigin: false }));

/**
 * A new credential for the creation options `options` (PublicKeyCredentialCreationOptionsJSON).
 * @returns `{ credential, response }`: what `assertion` needs later, and the RegistrationResponseJSON to post.
 */
export function createPasskey(options) {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const { x, y } = publicKey.export({ format: 'jwk' });
  const coseKey = new Map([...COSE_EC2_P256_ES256, [-2, Buffer.from(x, 'base64url')], [-3, Buffer.from(y, 'base64url')]]);
  const id = randomBytes(16);
  const authData = Buffer.concat([RP_ID_HASH, Buffer.from([FLAGS_REGISTRATION]), Buffer.alloc(4), Buffer.alloc(16), Buffer.from([0, id.length]), id, isoCBOR.encode(coseKey)]);
  const attestation = isoCBOR.encode(new Map([['fmt', 'none'], ['attStmt', new Map()], ['authData', new Uint8Array(authData)]]));
  const credential = { id: id.toString('base64url'), privateKey, userHandle: options.user.id };
  const response = {
    id: credential.id,
    rawId: credential.id,
    type: 'public-key',
    clientExtensionResults: {},
    response: { clientDataJSON: clientData('webauthn.create', options.challenge).toString('base64url'), attestationObject: Buffer.from(attestation).toString('base64url'), transports: ['internal'] },
  };
  return { credential, response };
}

/** The AuthenticationResponseJSON of `credential` for the sign-in challenge `challenge` (counter 0). */
export function assertion(credential, challenge) {
  const authenticatorData = Buffer.concat([RP_ID_HASH, Buffer.from([FLAGS_ASSERTION]), Buffer.alloc(4)]);
  const data = clientData('webauthn.get', challenge);
  const signature = sign('sha256', Buffer.concat([authenticatorData, createHash('sha256').update(data).digest()]), credential.privateKey);
  return {
    id: credential.id,
    rawId: credential.id,
    type: 'public-key',
    clientExtensionResults: {},
    response: { clientDataJSON: data.toString('base64url'), authenticatorData: authenticatorData.toString('base64url'), signature: signature.toString('base64url'), userHandle: credential.userHandle },
  };
}
