import { Type } from '@sinclair/typebox';
import { VERIFICATION_CODE_DIGITS } from '../../crypto/secrets.js';
import { withRule } from '../../errors.js';
import { EmailAddressSchema, EXAMPLE_USER, NewPasswordSchema } from '../users/users.schemas.js';

/** The code of the examples in the OpenAPI document. */
export const EXAMPLE_CODE = '581204';

/** A one-time code as a request carries it (docs/api.md#one-time-codes): reset and email change. */
export const OneTimeCodeSchema = withRule(
  Type.String({ pattern: `^[0-9]{${VERIFICATION_CODE_DIGITS}}$`, examples: [EXAMPLE_CODE] }),
  `must be the ${VERIFICATION_CODE_DIGITS} digits of the code in the email`,
);

/** POST /password-reset body (docs/api.md#request-a-password-reset). */
export const PasswordResetRequestSchema = Type.Object(
  { email: EmailAddressSchema },
  { title: 'PasswordResetRequest', additionalProperties: false, examples: [{ email: EXAMPLE_USER.email }] },
);

/** POST /password-reset/confirm body (docs/api.md#confirm-a-password-reset). */
export const PasswordResetConfirmSchema = Type.Object(
  { email: EmailAddressSchema, code: OneTimeCodeSchema, new_password: NewPasswordSchema },
  {
    title: 'PasswordResetConfirmRequest',
    additionalProperties: false,
    examples: [{ email: EXAMPLE_USER.email, code: EXAMPLE_CODE, new_password: 'plum tractor velvet harbour' }],
  },
);
