import { Type } from '@sinclair/typebox';
import { withRule } from '../../errors.js';
import { EXAMPLE_USER } from '../users/users.schemas.js';

/** Examples of the OpenAPI document. */
const EXAMPLE_TOTP = '492039';
const EXAMPLE_SECRET = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP';
export const EXAMPLE_RECOVERY_CODES = [
  'qs7kd-4bn2a', 'm3xw6-hzpte', 'c7vfa-2k5nq', 'y4dr3-ujw6m', 'b6tgh-7zqe2',
  'n2pcw-k4rxa', 'f5mzu-3hd7t', 'w7aqe-6rjb4', 'h3ksv-5ny2d', 'u6gxc-4tqm7',
];

/** A TOTP code: 6 digits. */
const TotpCode = withRule(Type.String({ pattern: '^[0-9]{6}$', examples: [EXAMPLE_TOTP] }), 'must be the 6 digits the authenticator app shows');
/** A TOTP code or a recovery code (disable, regeneration). */
const AnyCode = withRule(
  Type.String({ minLength: 6, maxLength: 32, examples: [EXAMPLE_TOTP] }),
  'must be the 6 digits the authenticator app shows, or a recovery code',
);
const RecoveryCode = withRule(Type.String({ minLength: 1, maxLength: 32, examples: [EXAMPLE_RECOVERY_CODES[0]] }), 'must be one of the recovery codes');

/** MfaSetupRequest (docs/api.md#set-up-totp): the password, left out by a user who has none (a recent sign-in instead). */
export const MfaSetupRequestSchema = Type.Object({ password: Type.Optional(Type.String()) }, { title: 'MfaSetupRequest', additionalProperties: false, examples: [{ password: EXAMPLE_USER.password }] });

/** MfaSetupResponse: the secret and its otpauth URI, shown once. */
export const MfaSetupResponseSchema = Type.Object(
  { secret: Type.String(), otpauth_uri: Type.String() },
  {
    title: 'MfaSetupResponse',
    additionalProperties: false,
    examples: [{ secret: EXAMPLE_SECRET, otpauth_uri: `otpauth://totp/Latchkey:alice%40example.com?secret=${EXAMPLE_SECRET}&issuer=Latchkey&algorithm=SHA1&digits=6&period=30` }],
  },
);

/** MfaEnableRequest (docs/api.md#enable-totp). */
export const MfaEnableRequestSchema = Type.Object({ code: TotpCode }, { title: 'MfaEnableRequest', additionalProperties: false, examples: [{ code: EXAMPLE_TOTP }] });

/** RecoveryCodesResponse: 10 recovery codes, shown once. */
export const RecoveryCodesResponseSchema = Type.Object(
  { recovery_codes: Type.Array(Type.String(), { minItems: 10, maxItems: 10 }) },
  { title: 'RecoveryCodesResponse', additionalProperties: false, examples: [{ recovery_codes: EXAMPLE_RECOVERY_CODES }] },
);

/** MfaPasswordAndCodeRequest (disable, regeneration): the password (left out by a user who has none) and a TOTP or recovery code. */
export const MfaPasswordAndCodeRequestSchema = Type.Object(
  { password: Type.Optional(Type.String()), code: AnyCode },
  { title: 'MfaPasswordAndCodeRequest', additionalProperties: false, examples: [{ password: EXAMPLE_USER.password, code: EXAMPLE_TOTP }] },
);

/** SignInMfaRequest (docs/api.md#sign-in-second-step): exactly one of `code` and `recovery_code`. */
export const SignInMfaRequestSchema = Type.Union(
  [
    Type.Object({ code: TotpCode }, { additionalProperties: false }),
    Type.Object({ recovery_code: RecoveryCode }, { additionalProperties: false }),
  ],
  { title: 'SignInMfaRequest', examples: [{ code: EXAMPLE_TOTP }] },
);
