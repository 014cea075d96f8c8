import { Type } from '@sinclair/typebox';
import { VERIFICATION_CODE_DIGITS } from '../../crypto/secrets.js';
import { withRule } from '../../errors.js';
import { EmailAddressSchema, EXAMPLE_USER } from '../users/users.schemas.js';

/** The code of the examples in the OpenAPI document. */
const EXAMPLE_CODE = '493017';

const Code = withRule(Type.String({ pattern: `^[0-9]{${VERIFICATION_CODE_DIGITS}}$`, examples: [EXAMPLE_CODE] }), `must be the ${VERIFICATION_CODE_DIGITS} digits of the code in the email`);

/** GET /verify-email query (docs/api.md#verify-email-get). Other query parameters (for example tracking tags added by mail clients) are ignored. */
export const VerifyEmailQuerySchema = Type.Object({ email: EmailAddressSchema, code: Code });

/** POST /verify-email body: the same fields, no others. */
export const VerifyEmailBodySchema = Type.Object(
  { email: EmailAddressSchema, code: Code },
  { title: 'VerifyEmailRequest', additionalProperties: false, examples: [{ email: EXAMPLE_USER.email, code: EXAMPLE_CODE }] },
);

/** POST /verify-email/resend body. */
export const ResendVerificationBodySchema = Type.Object(
  { email: EmailAddressSchema },
  { title: 'ResendVerificationRequest', additionalProperties: false, examples: [{ email: EXAMPLE_USER.email }] },
);
