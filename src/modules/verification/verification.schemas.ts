import { Type } from '@sinclair/typebox';

const Email = Type.String({ format: 'email', maxLength: 320 });
const Code = Type.String({ pattern: '^[0-9]{6}$' });

/** GET /verify-email query (spec §4). Other query parameters (for example tracking tags added by mail clients) are ignored. */
export const VerifyEmailQuerySchema = Type.Object({ email: Email, code: Code });

/** POST /verify-email body: the same fields, no others. */
export const VerifyEmailBodySchema = Type.Object({ email: Email, code: Code }, { title: 'VerifyEmailRequest', additionalProperties: false });

/** POST /verify-email/resend body. */
export const ResendVerificationBodySchema = Type.Object({ email: Email }, { title: 'ResendVerificationRequest', additionalProperties: false });
