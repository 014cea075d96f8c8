import { Type, type Static } from '@sinclair/typebox';
import { EXAMPLE_USER } from '../users/users.schemas.js';

/** DeleteAccountRequest (docs/api.md#delete-account): the account's password, checked as change-password checks `current_password`. */
export const DeleteAccountRequestSchema = Type.Object(
  { password: Type.String() },
  { title: 'DeleteAccountRequest', additionalProperties: false, examples: [{ password: EXAMPLE_USER.password }] },
);
export type DeleteAccountRequest = Static<typeof DeleteAccountRequestSchema>;
