import { Type, type Static } from '@sinclair/typebox';
import { PASSWORD_MAX_CODE_POINTS, PASSWORD_MIN_CODE_POINTS } from '../../crypto/password.js';
import { withRule } from '../../errors.js';
import { EMAIL_MAX_LENGTH, USERNAME_MAX_LENGTH, USERNAME_MIN_LENGTH } from './identifiers.js';
import type { UserRow } from './users.repo.js';

/** The user of the examples in the OpenAPI document; a test sends each request example (test/http/openapi-examples.test.ts). */
export const EXAMPLE_USER = { id: '0b5e7a4c-3f1d-4c8e-9a2b-6d7f8e9a0b1c', username: 'alice', email: 'alice@example.com', password: 'correct horse battery staple' } as const;

/** EXAMPLE_USER as a wire User once the email is verified. */
export const EXAMPLE_VERIFIED_USER = { id: EXAMPLE_USER.id, username: EXAMPLE_USER.username, email: EXAMPLE_USER.email, phone: null, is_email_verified: true, is_phone_verified: false };

/** An email address as a request field: sign-up, verify-email and resend. */
export const EmailAddressSchema = withRule(Type.String({ format: 'email', maxLength: EMAIL_MAX_LENGTH, examples: [EXAMPLE_USER.email] }), `must be an email address of at most ${EMAIL_MAX_LENGTH} characters`);

/** A password being chosen: sign-up's `password`, change-password's `new_password`. */
export const NewPasswordSchema = withRule(
  Type.String({ minLength: PASSWORD_MIN_CODE_POINTS, maxLength: PASSWORD_MAX_CODE_POINTS }),
  `must be ${PASSWORD_MIN_CODE_POINTS} to ${PASSWORD_MAX_CODE_POINTS} characters`,
);

/** The User object (docs/api.md#operations): all fields present, no others. */
export const UserSchema = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    username: Type.String({ minLength: USERNAME_MIN_LENGTH, maxLength: USERNAME_MAX_LENGTH, pattern: '^[a-z0-9_]+$' }),
    email: Type.Union([Type.String({ format: 'email' }), Type.Null()]),
    phone: Type.Union([Type.String({ pattern: '^[+][0-9]{8,15}$' }), Type.Null()]),
    is_email_verified: Type.Boolean(),
    is_phone_verified: Type.Boolean(),
  },
  {
    $id: 'User',
    title: 'User',
    additionalProperties: false,
    examples: [EXAMPLE_VERIFIED_USER],
  },
);
export type User = Static<typeof UserSchema>;

/** The wire User of a stored user (never the password hash). */
export function toUser(row: Pick<UserRow, 'id' | 'username' | 'email' | 'phone' | 'is_email_verified' | 'is_phone_verified'>): User {
  return {
    id: row.id,
    username: row.username,
    email: row.email,
    phone: row.phone,
    is_email_verified: row.is_email_verified,
    is_phone_verified: row.is_phone_verified,
  };
}

/**
 * The names of the User members whose values differ between `before` and `after`, in the User's
 * order: the `changed` of a `user.updated` event (docs/api.md#event-types).
 */
export function changedMembers(before: User, after: User): (keyof User)[] {
  return (Object.keys(after) as (keyof User)[]).filter((name) => before[name] !== after[name]);
}

/** SignUpRequest: at least one of `email` and `phone` (docs/api.md#sign-up). */
export const SignUpRequestSchema = Type.Object(
  {
    username: withRule(
      Type.String({ minLength: USERNAME_MIN_LENGTH, maxLength: USERNAME_MAX_LENGTH, pattern: '^[a-zA-Z0-9_]+$' }),
      `must be ${USERNAME_MIN_LENGTH} to ${USERNAME_MAX_LENGTH} letters, digits or underscores`,
    ),
    email: Type.Optional(EmailAddressSchema),
    phone: Type.Optional(
      withRule(Type.String({ pattern: '^[+]?[0-9 ()-]{8,24}$' }), 'must be a phone number: 8 to 24 digits, spaces, hyphens or parentheses, after an optional +'),
    ),
    password: NewPasswordSchema,
  },
  {
    title: 'SignUpRequest',
    additionalProperties: false,
    anyOf: [{ required: ['email'] }, { required: ['phone'] }],
    examples: [
      { username: EXAMPLE_USER.username, email: EXAMPLE_USER.email, password: EXAMPLE_USER.password },
      // A number from the range Ofcom keeps for drama (+44 20 7946 0xxx): it belongs to no one.
      { username: 'bob', phone: '+44 20 7946 0958', password: 'plum tractor velvet harbour' },
    ],
  },
);

export const SignUpResponseSchema = Type.Object(
  { user: UserSchema },
  { additionalProperties: false, examples: [{ user: { ...EXAMPLE_VERIFIED_USER, is_email_verified: false } }] },
);

/**
 * SetPasswordRequest (docs/api.md#set-a-password): the first password of a user who has none.
 * Its length is the policy's, checked by the service after the recent sign-in (401) and "no
 * password yet" (409), in that order, so the schema only asks for a string.
 */
export const SetPasswordRequestSchema = Type.Object(
  { new_password: Type.String({ description: `${PASSWORD_MIN_CODE_POINTS} to ${PASSWORD_MAX_CODE_POINTS} characters (after NFKC normalisation), and the password policy` }) },
  { title: 'SetPasswordRequest', additionalProperties: false, examples: [{ new_password: 'plum tractor velvet harbour' }] },
);

/** ChangePasswordRequest (docs/api.md#change-password). */
export const ChangePasswordRequestSchema = Type.Object(
  {
    current_password: Type.String(),
    new_password: NewPasswordSchema,
  },
  { title: 'ChangePasswordRequest', additionalProperties: false, examples: [{ current_password: EXAMPLE_USER.password, new_password: 'plum tractor velvet harbour' }] },
);

