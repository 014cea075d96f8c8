import { Type, type Static } from '@sinclair/typebox';
import { EXAMPLE_USER, EXAMPLE_VERIFIED_USER, UserSchema } from '../users/users.schemas.js';
import type { SessionRow } from './sessions.repo.js';

/** SignInRequest: at least one of `username`, `email`, `phone` (docs/api.md#sign-in). */
export const SignInRequestSchema = Type.Object(
  {
    username: Type.Optional(Type.String()),
    email: Type.Optional(Type.String({ format: 'email' })),
    phone: Type.Optional(Type.String()),
    password: Type.String(),
  },
  {
    title: 'SignInRequest',
    additionalProperties: false,
    anyOf: [{ required: ['username'] }, { required: ['email'] }, { required: ['phone'] }],
    examples: [
      { username: EXAMPLE_USER.username, password: EXAMPLE_USER.password },
      { email: EXAMPLE_USER.email, password: EXAMPLE_USER.password },
    ],
  },
);

const TokensSchema = Type.Object({ access_token: Type.String() }, { additionalProperties: false });

/** What the response examples of the OpenAPI document show: one session and a shortened access token. */
const EXAMPLE_SESSION_ID = '5f0c2b1e-8d4a-4e6f-b7c3-2a9d1e0f4b8c';
const EXAMPLE_TOKENS = { access_token: 'eyJhbGciOiJSUzI1NiIsInR5cCI6ImF0K2p3dCIsImtpZCI6Ii4uLiJ9.eyJzdWIiOiIuLi4ifQ.c2lnbmF0dXJl' };

export const SignInResponseSchema = Type.Object(
  { user: UserSchema, session_id: Type.String({ format: 'uuid' }), tokens: TokensSchema },
  { title: 'SignInResponse', additionalProperties: false, examples: [{ user: EXAMPLE_VERIFIED_USER, session_id: EXAMPLE_SESSION_ID, tokens: EXAMPLE_TOKENS }] },
);

export const RefreshResponseSchema = Type.Object(
  { tokens: TokensSchema, session_id: Type.String({ format: 'uuid' }) },
  { title: 'RefreshResponse', additionalProperties: false, examples: [{ tokens: EXAMPLE_TOKENS, session_id: EXAMPLE_SESSION_ID }] },
);

export const MeResponseSchema = Type.Object(
  { user: UserSchema, session_id: Type.String({ format: 'uuid' }) },
  { title: 'MeResponse', additionalProperties: false, examples: [{ user: EXAMPLE_VERIFIED_USER, session_id: EXAMPLE_SESSION_ID }] },
);

/** The Session object (docs/api.md#list-sessions). */
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

export const SessionsResponseSchema = Type.Object(
  { sessions: Type.Array(SessionSchema) },
  {
    title: 'SessionsResponse',
    additionalProperties: false,
    examples: [
      {
        sessions: [
          {
            id: EXAMPLE_SESSION_ID,
            device_id: null,
            ip: '203.0.113.7',
            user_agent: 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0',
            created_at: '2025-01-15T09:30:00.000Z',
            last_used_at: '2025-01-15T10:05:12.000Z',
            expires_at: '2025-02-14T09:30:00.000Z',
            current: true,
          },
        ],
      },
    ],
  },
);

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
