import { Type, type Static } from '@sinclair/typebox';
import { PASSWORD_MAX_CODE_POINTS, PASSWORD_MIN_CODE_POINTS } from '../../crypto/password.js';
import { EMAIL_MAX_LENGTH, USERNAME_MAX_LENGTH, USERNAME_MIN_LENGTH } from './identifiers.js';
import type { UserRow } from './users.repo.js';

/** Spec §2 User: all fields present, no others. */
export const UserSchema = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    username: Type.String({ minLength: USERNAME_MIN_LENGTH, maxLength: USERNAME_MAX_LENGTH, pattern: '^[a-z0-9_]+$' }),
    email: Type.Union([Type.String({ format: 'email' }), Type.Null()]),
    phone: Type.Union([Type.String({ pattern: '^[+][0-9]{8,15}$' }), Type.Null()]),
    is_email_verified: Type.Boolean(),
    is_phone_verified: Type.Boolean(),
  },
  { $id: 'User', title: 'User', additionalProperties: false },
);
export type User = Static<typeof UserSchema>;

/** The wire User of a stored user (never the password hash). */
export function toUser(row: UserRow): User {
  return {
    id: row.id,
    username: row.username,
    email: row.email,
    phone: row.phone,
    is_email_verified: row.is_email_verified,
    is_phone_verified: row.is_phone_verified,
  };
}

/** Spec §2 SignUpRequest; at least one of `email` and `phone`. */
export const SignUpRequestSchema = Type.Object(
  {
    username: Type.String({ minLength: USERNAME_MIN_LENGTH, maxLength: USERNAME_MAX_LENGTH, pattern: '^[a-zA-Z0-9_]+$' }),
    email: Type.Optional(Type.String({ format: 'email', maxLength: EMAIL_MAX_LENGTH })),
    phone: Type.Optional(Type.String({ pattern: '^[+]?[0-9 ()-]{8,24}$' })),
    password: Type.String({ minLength: PASSWORD_MIN_CODE_POINTS, maxLength: PASSWORD_MAX_CODE_POINTS }),
  },
  { title: 'SignUpRequest', additionalProperties: false, anyOf: [{ required: ['email'] }, { required: ['phone'] }] },
);

export const SignUpResponseSchema = Type.Object({ user: UserSchema }, { additionalProperties: false });

/** Spec §2 ChangePasswordRequest. */
export const ChangePasswordRequestSchema = Type.Object(
  {
    current_password: Type.String(),
    new_password: Type.String({ minLength: PASSWORD_MIN_CODE_POINTS, maxLength: PASSWORD_MAX_CODE_POINTS }),
  },
  { title: 'ChangePasswordRequest', additionalProperties: false },
);
