import { Type, type Static } from '@sinclair/typebox';
import { UserSchema } from '../users/users.schemas.js';
import type { SessionRow } from './sessions.repo.js';

/** Spec §2 SignInRequest; at least one of `username`, `email`, `phone`. */
export const SignInRequestSchema = Type.Object(
  {
    username: Type.Optional(Type.String()),
    email: Type.Optional(Type.String({ format: 'email' })),
    phone: Type.Optional(Type.String()),
    password: Type.String(),
  },
  { title: 'SignInRequest', additionalProperties: false, anyOf: [{ required: ['username'] }, { required: ['email'] }, { required: ['phone'] }] },
);

const TokensSchema = Type.Object({ access_token: Type.String() }, { additionalProperties: false });

export const SignInResponseSchema = Type.Object(
  { user: UserSchema, session_id: Type.String({ format: 'uuid' }), tokens: TokensSchema },
  { title: 'SignInResponse', additionalProperties: false },
);

export const RefreshResponseSchema = Type.Object(
  { tokens: TokensSchema, session_id: Type.String({ format: 'uuid' }) },
  { title: 'RefreshResponse', additionalProperties: false },
);

export const MeResponseSchema = Type.Object(
  { user: UserSchema, session_id: Type.String({ format: 'uuid' }) },
  { title: 'MeResponse', additionalProperties: false },
);

/** Spec §2 Session. */
export const SessionSchema = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    device_id: Type.Union([Type.String({ format: 'uuid' }), Type.Null()]),
    ip: Type.Union([Type.String(), Type.Null()]),
    user_agent: Type.Union([Type.String(), Type.Null()]),
    created_at: Type.String({ format: 'date-time' }),
    last_used_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    expires_at: Type.String({ format: 'date-time' }),
    current: Type.Boolean(),
  },
  { $id: 'Session', title: 'Session', additionalProperties: false },
);
export type Session = Static<typeof SessionSchema>;

export const SessionsResponseSchema = Type.Object({ sessions: Type.Array(SessionSchema) }, { title: 'SessionsResponse', additionalProperties: false });

export const SessionIdParamsSchema = Type.Object({ session_id: Type.String() });

/** The wire Session of a row; `current` marks the caller's own session. */
export function toSession(row: SessionRow, currentSessionId: string): Session {
  return {
    id: row.id,
    device_id: row.device_id,
    ip: row.ip,
    user_agent: row.user_agent,
    created_at: row.created_at.toISOString(),
    last_used_at: row.last_used_at === null ? null : row.last_used_at.toISOString(),
    expires_at: row.expires_at.toISOString(),
    current: row.id === currentSessionId,
  };
}
