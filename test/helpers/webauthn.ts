import { createHash, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto';
import { isoCBOR } from '@simplewebauthn/server/helpers';

/**
 * A software WebAuthn authenticator for HTTP tests (W3C WebAuthn Level 3 §6): ES256 credentials,
 * `none` attestation, discoverable credentials with user handles, a signature counter per
 * credential. It plays the browser too: it writes clientDataJSON with the origin it is given.
 * Every field a test may want wrong (origin, RP ID, flags, counter, user handle, challenge) can be
 * overridden per call.
 */

/** Authenticator data flags (W3C WebAuthn Level 3 §6.1). */
const FLAG_UP = 0x01;
const FLAG_UV = 0x04;
const FLAG_AT = 0x40;
/** COSE key parameters of an EC2 P-256 ES256 key (RFC 9053 §7.1, RFC 9052 §7). */
const COSE = { kty: 1, alg: 3, crv: -1, x: -2, y: -3, EC2: 2, ES256: -7, P256: 1 } as const;

export interface StoredCredential {
  readonly id: string;
  readonly privateKey: KeyObject;
  readonly userHandle: string;
  counter: number;
}

/** What a ceremony may get wrong on purpose. */
export interface CeremonyOverrides {
  origin?: string;
  rpId?: string;
  challenge?: string;
  type?: string;
  userVerified?: boolean;
  userPresent?: boolean;
  /** The counter to sign (default: one more than the last). */
  counter?: number;
  userHandle?: string | null;
  /** Registration: the credential id the authenticator data holds (default 16 random bytes). */
  credentialId?: Buffer;
  /** Registration: the `id` and `rawId` the response names (default the credential id). */
  responseId?: string;
  /** Registration: `clientExtensionResults` (default `{}`). */
  clientExtensionResults?: Record<string, unknown>;
  /** Registration: `response.transports` (default `["internal"]`). */
  transports?: string[];
}

const b64url = (bytes: Uint8Array | Buffer): string => Buffer.from(bytes).toString('base64url');
const sha256 = (data: Uint8Array | string): Buffer => createHash('sha256').update(data).digest();

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

export class SoftwareAuthenticator {
  readonly credentials = new Map<string, StoredCredential>();

  constructor(private readonly defaults: { origin: string; rpId: string } = { origin: 'http://localhost:3000', rpId: 'localhost' }) {}

  private clientData(type: string, challenge: string, o: CeremonyOverrides): string {
    return b64url(Buffer.from(JSON.stringify({ type: o.type ?? type, challenge: o.challenge ?? challenge, origin: o.origin ?? this.defaults.origin, crossOrigin: false })));
  }

  private flags(o: CeremonyOverrides, extra = 0): number {
    return ((o.userPresent ?? true) ? FLAG_UP : 0) | ((o.userVerified ?? true) ? FLAG_UV : 0) | extra;
  }

  /** A registration response to `options` (PublicKeyCredentialCreationOptionsJSON); the credential is kept. */
  create(options: { challenge: string; user: { id: string }; rp: { id?: string } }, o: CeremonyOverrides = {}) {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const jwk = publicKey.export({ format: 'jwk' });
    const coseKey = new Map<number, number | Uint8Array>([
      [COSE.kty, COSE.EC2],
      [COSE.alg, COSE.ES256],
      [COSE.crv, COSE.P256],
      [COSE.x, Buffer.from(jwk.x!, 'base64url')],
      [COSE.y, Buffer.from(jwk.y!, 'base64url')],
    ]);
    const credentialId = o.credentialId ?? randomBytes(16);
    const counter = o.counter ?? 0;
    const authData = Buffer.concat([
      sha256(o.rpId ?? options.rp.id ?? this.defaults.rpId),
      Buffer.from([this.flags(o, FLAG_AT)]),
      u32(counter),
      Buffer.alloc(16), // AAGUID: none
      Buffer.from([credentialId.length >> 8, credentialId.length & 0xff]),
      credentialId,
      Buffer.from(isoCBOR.encode(coseKey)),
    ]);
    const attestationObject = isoCBOR.encode(new Map<string, unknown>([['fmt', 'none'], ['attStmt', new Map()], ['authData', new Uint8Array(authData)]]) as never);
    const id = b64url(credentialId);
    this.credentials.set(id, { id, privateKey, userHandle: options.user.id, counter });
    return {
      id: o.responseId ?? id,
      rawId: o.responseId ?? id,
      response: { clientDataJSON: this.clientData('webauthn.create', options.challenge, o), attestationObject: b64url(attestationObject), transports: o.transports ?? ['internal'] },
      clientExtensionResults: o.clientExtensionResults ?? {},
      type: 'public-key' as const,
      authenticatorAttachment: 'platform' as const,
    };
  }

  /** An authentication response to `options` (PublicKeyCredentialRequestOptionsJSON) with credential `credentialId` (default: the only one). */
  get(options: { challenge: string; rpId?: string }, credentialId?: string, o: CeremonyOverrides = {}) {
    const credential = credentialId === undefined ? [...this.credentials.values()].at(-1) : this.credentials.get(credentialId);
    if (credential === undefined) throw new Error('no such credential');
    const counter = o.counter ?? credential.counter + 1;
    credential.counter = counter;
    const authenticatorData = Buffer.concat([sha256(o.rpId ?? options.rpId ?? this.defaults.rpId), Buffer.from([this.flags(o)]), u32(counter)]);
    const clientDataJSON = this.clientData('webauthn.get', options.challenge, o);
    const signature = sign('sha256', Buffer.concat([authenticatorData, sha256(Buffer.from(clientDataJSON, 'base64url'))]), credential.privateKey);
    const userHandle = o.userHandle === undefined ? credential.userHandle : o.userHandle;
    return {
      id: credential.id,
      rawId: credential.id,
      response: { clientDataJSON, authenticatorData: b64url(authenticatorData), signature: b64url(signature), ...(userHandle === null ? {} : { userHandle }) },
      clientExtensionResults: {},
      type: 'public-key' as const,
      authenticatorAttachment: 'platform' as const,
    };
  }
}
