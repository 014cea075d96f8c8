import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { withRule } from '../../errors.js';
import type { PasskeyRow } from './passkeys.repo.js';

/** Longest passkey name, in characters (docs/api.md#passkeys). */
export const MAX_PASSKEY_NAME_LENGTH = 64;
/**
 * Longest base64url member of a WebAuthn response, in characters: above any attestation object
 * or signature a browser sends with `attestation: "none"`, and below the 16 KiB body limit.
 */
const MAX_BASE64URL_LENGTH = 12_000;
/** Longest credential id, in bytes (W3C WebAuthn Level 3 §7.1 step 24: longer ones are refused). */
export const MAX_CREDENTIAL_ID_BYTES = 1023;
/** Its base64url length, unpadded: 4 characters per 3 bytes. */
const MAX_CREDENTIAL_ID_LENGTH = Math.ceil((MAX_CREDENTIAL_ID_BYTES * 4) / 3);

const EXAMPLE_PASSKEY = {
  id: '0b7f1c9e-3d2a-4c5b-9e8f-1a2b3c4d5e6f',
  name: 'Laptop',
  created_at: '2026-03-02T09:15:00.000Z',
  last_used_at: '2026-03-04T18:40:12.000Z',
};

/**
 * Examples of the OpenAPI document: a registration and an assertion of a software authenticator
 * for `http://localhost:3000` (no example can be a live one: each signs a challenge used once).
 */
const EXAMPLE_REGISTRATION_RESPONSE = {
  'id': '_V_Z6NYEB5DIq9RwxHtGzg',
  'rawId': '_V_Z6NYEB5DIq9RwxHtGzg',
  'response': {
    'clientDataJSON': 'eyJ0eXBlIjoid2ViYXV0aG4uY3JlYXRlIiwiY2hhbGxlbmdlIjoieE9qdXBNRjVJSWhaeld6UHljMzVWWWpmMEthN3RXMzVBYm85LTR4ZmJvcyIsIm9yaWdpbiI6Imh0dHA6Ly9sb2NhbGhvc3Q6MzAwMCIsImNyb3NzT3JpZ2luIjpmYWxzZX0',
    'attestationObject': 'o2NmbXRkbm9uZWdhdHRTdG10oGhhdXRoRGF0YViUSZYN5YgOjGh0NBcPZHZgW4_krrmihjLHmVzzuoMdl2NFAAAAAAAAAAAAAAAAAAAAAAAAAAAAEP1f2ejWBAeQyKvUcMR7Rs6lAQIDJiABIVggAxkx415LIdIx-KqWIn6TF4M5DNqEIwxdlOZEJ189yMkiWCCGaup1OTmp_18sl_YQVHrwq03f-LaBtqgmhU6HwNVGAQ',
    'transports': [
      'internal'
    ]
  },
  'clientExtensionResults': {},
  'type': 'public-key',
  'authenticatorAttachment': 'platform'
};
const EXAMPLE_AUTHENTICATION_RESPONSE = {
  'id': '_V_Z6NYEB5DIq9RwxHtGzg',
  'rawId': '_V_Z6NYEB5DIq9RwxHtGzg',
  'response': {
    'clientDataJSON': 'eyJ0eXBlIjoid2ViYXV0aG4uZ2V0IiwiY2hhbGxlbmdlIjoiV0FfSk1Ba1B1ZVVwRjVlRV94Vksyb0t5aGFkR0ZuQnpDV2NOYW5zNWhKUSIsIm9yaWdpbiI6Imh0dHA6Ly9sb2NhbGhvc3Q6MzAwMCIsImNyb3NzT3JpZ2luIjpmYWxzZX0',
    'authenticatorData': 'SZYN5YgOjGh0NBcPZHZgW4_krrmihjLHmVzzuoMdl2MFAAAAAQ',
    'signature': 'MEYCIQDAk_4E651DPPqXpxAeI_RmfGJrskvUF4HSlJGTSG6aMQIhAMD5xeSZR8aemdIEETjgszDYptHsgeiJS2vz_TdA-dzl',
    'userHandle': 'q0b4tX0mWQeQ3H1uK3V7lYxq8cRk2y7v8J5j0s1Zp4E'
  },
  'clientExtensionResults': {},
  'type': 'public-key',
  'authenticatorAttachment': 'platform'
};
const EXAMPLE_CREATION_OPTIONS = {
  challenge: 'xOjupMF5IIhZzWzPyc35VYjf0Ka7tW35Abo9-4xfbos',
  rp: { name: 'Latchkey', id: 'localhost' },
  user: { id: 'q0b4tX0mWQeQ3H1uK3V7lYxq8cRk2y7v8J5j0s1Zp4E', name: 'alice@example.com', displayName: 'alice' },
  pubKeyCredParams: [
    { alg: -8, type: 'public-key' },
    { alg: -7, type: 'public-key' },
    { alg: -257, type: 'public-key' },
  ],
  timeout: 300000,
  attestation: 'none',
  excludeCredentials: [],
  authenticatorSelection: { residentKey: 'required', userVerification: 'required', requireResidentKey: true },
  extensions: { credProps: true },
  hints: [],
};
const EXAMPLE_REQUEST_OPTIONS = { rpId: 'localhost', challenge: 'WA_JMAkPueUpF5eE_xVK2oKyhadGFnBzCWcNans5hJQ', timeout: 300000, userVerification: 'required' };

const Base64Url = Type.String({ pattern: '^[A-Za-z0-9_-]*$', maxLength: MAX_BASE64URL_LENGTH });
const CredentialId = Type.String({ pattern: '^[A-Za-z0-9_-]+$', maxLength: MAX_CREDENTIAL_ID_LENGTH });
const strict = { additionalProperties: false } as const;
/** Extension inputs and outputs: open-ended by design (W3C WebAuthn Level 3 §9). */
const Extensions = Type.Object({}, { additionalProperties: true });
const AuthenticatorAttachment = Type.Union([Type.Literal('platform'), Type.Literal('cross-platform')]);
const Transports = Type.Array(Type.String({ maxLength: 32 }), { maxItems: 16 });

/**
 * A passkey name: at most 64 characters, none of them a control or format character or a line
 * or paragraph separator (names appear in notice emails, one per line, and bidirectional
 * overrides could make one read as another); empty means none.
 */
const PasskeyName = withRule(
  Type.Union([Type.String({ maxLength: MAX_PASSKEY_NAME_LENGTH, pattern: '^[^\\p{Cc}\\p{Cf}\\p{Zl}\\p{Zp}]*$' }), Type.Null()]),
  `must be a name of at most ${MAX_PASSKEY_NAME_LENGTH} characters without control, format or line-separator characters, or null`,
);

/** Passkey (docs/api.md#passkeys): exactly these members. */
export const PasskeySchema = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    name: Type.Union([Type.String(), Type.Null()]),
    created_at: Type.String({ format: 'date-time' }),
    last_used_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  },
  { title: 'Passkey', ...strict, examples: [EXAMPLE_PASSKEY] },
);

/** The wire form of a stored passkey. */
export function toPasskey(row: PasskeyRow): { id: string; name: string | null; created_at: string; last_used_at: string | null } {
  return { id: row.id, name: row.name, created_at: row.created_at.toISOString(), last_used_at: row.last_used_at?.toISOString() ?? null };
}

export const PasskeyResponseSchema = Type.Object({ passkey: PasskeySchema }, { title: 'PasskeyResponse', ...strict, examples: [{ passkey: EXAMPLE_PASSKEY }] });
export const PasskeyListResponseSchema = Type.Object(
  { passkeys: Type.Array(PasskeySchema) },
  { title: 'PasskeyListResponse', ...strict, examples: [{ passkeys: [EXAMPLE_PASSKEY] }] },
);

/** A public-key credential as @simplewebauthn/browser serialises it, with its `response` member. */
function credentialJson<R extends TSchema>(title: string, response: R) {
  return Type.Object(
    {
      id: CredentialId,
      rawId: CredentialId,
      response,
      authenticatorAttachment: Type.Optional(AuthenticatorAttachment),
      clientExtensionResults: Extensions,
      type: Type.Literal('public-key'),
    },
    { title, ...strict },
  );
}

/** RegistrationResponseJSON (W3C WebAuthn Level 3 §5.1, `toJSON()`). */
const RegistrationResponseJson = credentialJson(
  'RegistrationResponseJSON',
  Type.Object(
    {
      clientDataJSON: Base64Url,
      attestationObject: Base64Url,
      authenticatorData: Type.Optional(Base64Url),
      transports: Type.Optional(Transports),
      publicKeyAlgorithm: Type.Optional(Type.Integer()),
      publicKey: Type.Optional(Base64Url),
    },
    strict,
  ),
);

/** AuthenticationResponseJSON (W3C WebAuthn Level 3 §5.1, `toJSON()`). */
const AuthenticationResponseJson = credentialJson(
  'AuthenticationResponseJSON',
  Type.Object(
    { clientDataJSON: Base64Url, authenticatorData: Base64Url, signature: Base64Url, userHandle: Type.Optional(Base64Url) },
    strict,
  ),
);

/** PasskeyRegistrationRequest (docs/api.md#register-a-passkey). */
export const PasskeyRegistrationRequestSchema = Type.Object(
  { response: RegistrationResponseJson, name: Type.Optional(PasskeyName) },
  { title: 'PasskeyRegistrationRequest', ...strict, examples: [{ response: EXAMPLE_REGISTRATION_RESPONSE, name: 'Laptop' }] },
);

/** PasskeyRenameRequest (docs/api.md#rename-a-passkey). */
export const PasskeyRenameRequestSchema = Type.Object({ name: PasskeyName }, { title: 'PasskeyRenameRequest', ...strict, examples: [{ name: 'Work laptop' }] });

/** PasskeySignInRequest (docs/api.md#sign-in-with-a-passkey). */
export const PasskeySignInRequestSchema = Type.Object({ response: AuthenticationResponseJson }, { title: 'PasskeySignInRequest', ...strict, examples: [{ response: EXAMPLE_AUTHENTICATION_RESPONSE }] });

/** The path parameter of one passkey; any string, so a malformed id answers 404 like an unknown one. */
export const PasskeyParamsSchema = Type.Object({ passkey_id: Type.String() }, strict);

const CredentialDescriptor = Type.Object({ id: Base64Url, type: Type.Literal('public-key'), transports: Type.Optional(Transports) }, strict);

/** PublicKeyCredentialCreationOptionsJSON, as the service answers it (docs/api.md#passkey-registration-options). */
export const CreationOptionsSchema = Type.Object(
  {
    challenge: Base64Url,
    rp: Type.Object({ name: Type.String(), id: Type.String() }, strict),
    user: Type.Object({ id: Base64Url, name: Type.String(), displayName: Type.String() }, strict),
    pubKeyCredParams: Type.Array(Type.Object({ alg: Type.Integer(), type: Type.Literal('public-key') }, strict)),
    timeout: Type.Integer(),
    attestation: Type.Literal('none'),
    excludeCredentials: Type.Array(CredentialDescriptor),
    authenticatorSelection: Type.Object(
      { residentKey: Type.Literal('required'), userVerification: Type.Literal('required'), requireResidentKey: Type.Literal(true) },
      strict,
    ),
    extensions: Extensions,
    hints: Type.Array(Type.String()),
  },
  { title: 'PublicKeyCredentialCreationOptionsJSON', ...strict, examples: [EXAMPLE_CREATION_OPTIONS] },
);
/** What {@link CreationOptionsSchema} describes. */
export type CreationOptions = Static<typeof CreationOptionsSchema>;

/** PublicKeyCredentialRequestOptionsJSON, as the service answers it (docs/api.md#passkey-sign-in-options). */
export const RequestOptionsSchema = Type.Object(
  { rpId: Type.String(), challenge: Base64Url, timeout: Type.Integer(), userVerification: Type.Literal('required') },
  { title: 'PublicKeyCredentialRequestOptionsJSON', ...strict, examples: [EXAMPLE_REQUEST_OPTIONS] },
);
/** What {@link RequestOptionsSchema} describes. */
export type RequestOptions = Static<typeof RequestOptionsSchema>;
