import { Type } from '@sinclair/typebox';
import { EmailAddressSchema, EXAMPLE_USER, EXAMPLE_VERIFIED_USER, UserSchema } from '../users/users.schemas.js';
import { EXAMPLE_CODE, OneTimeCodeSchema } from '../password-reset/password-reset.schemas.js';

/** The new address of the examples. */
const EXAMPLE_NEW_EMAIL = 'alice@example.org';

/** ChangeEmailRequest (docs/api.md#change-email): the new address and the account's password (left out by a user who has none). */
export const ChangeEmailRequestSchema = Type.Object(
  { new_email: EmailAddressSchema, password: Type.Optional(Type.String()) },
  { title: 'ChangeEmailRequest', additionalProperties: false, examples: [{ new_email: EXAMPLE_NEW_EMAIL, password: EXAMPLE_USER.password }] },
);

/** ConfirmEmailChangeRequest (docs/api.md#confirm-an-email-change): the code sent to the new address. */
export const ConfirmEmailChangeRequestSchema = Type.Object(
  { code: OneTimeCodeSchema },
  { title: 'ConfirmEmailChangeRequest', additionalProperties: false, examples: [{ code: EXAMPLE_CODE }] },
);

/** ConfirmEmailChangeResponse (docs/api.md#confirm-an-email-change): the user with its new, verified address. */
export const ConfirmEmailChangeResponseSchema = Type.Object(
  { user: UserSchema },
  { title: 'ConfirmEmailChangeResponse', additionalProperties: false, examples: [{ user: { ...EXAMPLE_VERIFIED_USER, email: EXAMPLE_NEW_EMAIL } }] },
);
