import { Type } from '@sinclair/typebox';
import { VERIFICATION_CODE_DIGITS } from '../../crypto/secrets.js';
import { EMAIL_MAX_LENGTH } from '../users/identifiers.js';

const Email = Type.String({ format: 'email', maxLength: EMAIL_MAX_LENGTH });
const Code = Type.String({ pattern: `^[0-9]{${VERIFICATION_CODE_DIGITS}}$` });

/** GET /verify-email query (spec §4). Other query parameters (for example tracking tags added by mail clients) are ignored. */
export const VerifyEmailQuerySchema = Type.Object({ email: Email, code: Code });

/** POST /verify-email body: the same fields, no others. */
export const VerifyEmailBodySchema = Type.Object({ email: Email, code: Code }, { title: 'VerifyEmailRequest', additionalProperties: false });

/** POST /verify-email/resend body. */
export const ResendVerificationBodySchema = Type.Object({ email: Email }, { title: 'ResendVerificationRequest', additionalProperties: false });
