import { Type, type Static } from '@sinclair/typebox';
import { EXAMPLE_USER } from '../users/users.schemas.js';

/**
 * DeleteAccountRequest (docs/api.md#delete-account): the account's password, checked as
 * change-password checks `current_password`; left out by a user who has none (a recent sign-in instead).
 */
export const DeleteAccountRequestSchema = Type.Object(
  { password: Type.Optional(Type.String()) },
  { title: 'DeleteAccountRequest', additionalProperties: false, examples: [{ password: EXAMPLE_USER.password }] },
);
export type DeleteAccountRequest = Static<typeof DeleteAccountRequestSchema>;
