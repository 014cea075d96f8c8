import { Type, type Static } from '@sinclair/typebox';
import { withRule } from '../../errors.js';
import { banInForce } from '../users/users.shared.js';
import { EMAIL_MAX_LENGTH, USERNAME_MAX_LENGTH, USERNAME_MIN_LENGTH } from '../users/identifiers.js';
import { EmailAddressSchema, EXAMPLE_USER, NewPasswordSchema, toUser, UserSchema } from '../users/users.schemas.js';
import type { SessionRow } from '../sessions/sessions.shared.js';
import { SessionSchema, SessionsResponseSchema, toSession, type Session } from '../sessions/sessions.schemas.js';
import type { AdminUserRow } from './admin-users.repo.js';
import type { AuditEntryRow } from './admin-audit.repo.js';
import { DeliverySchema, EndpointSchema } from '../webhooks/webhooks.schemas.js';

/** Items per page of a listing (docs/admin-api.md#pagination): 1 to 200, 50 by default. */
export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 200;
/** Longest `reason` of a ban, in characters: a note for the operators, not a document. */
export const BAN_REASON_MAX_LENGTH = 500;
/** Longest cursor accepted; the service's are about 130 characters. */
const CURSOR_MAX_LENGTH = 512;

const strict = { additionalProperties: false } as const;

/** The example key's id of the admin document. */
const EXAMPLE_KEY_ID = '7d2f8a31-5c4e-4b9a-8e1f-3a6b9c0d2e4f';
const EXAMPLE_CURSOR = 'WyJ1c2VycyIsIjIwMjUtMDEtMTVUMDk6MzA6MDAuMDAwMDAwWiIsIjBiNWU3YTRjLTNmMWQtNGM4ZS05YTJiLTZkN2Y4ZTlhMGIxYyJd.3oQ0n0V6n1vS4y5k7X2oWm0b8JvQk9s3l1r2t4u6w8Y';

/** A path or query value that must be a UUID (any case), checked by the schema: 400 `admin.validation_failed` otherwise. */
const UuidValue = withRule(Type.String({ pattern: '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$' }), 'must be a UUID');

export const UserIdParamsSchema = Type.Object({ user_id: UuidValue }, strict);
export const UserSessionParamsSchema = Type.Object({ user_id: UuidValue, session_id: UuidValue }, strict);
export const WebhookIdParamsSchema = Type.Object({ webhook_id: UuidValue }, strict);
export const WebhookDeliveryParamsSchema = Type.Object({ webhook_id: UuidValue, delivery_id: UuidValue }, strict);

/** `limit` of a listing, as a query string carries it (no type coercion: the schema reads the digits). */
const LimitValue = withRule(
  Type.String({ pattern: '^(?:[1-9]|[1-9][0-9]|1[0-9][0-9]|200)$', examples: ['50'] }),
  `must be a whole number from 1 to ${MAX_PAGE_SIZE}`,
);
const CursorValue = withRule(Type.String({ minLength: 1, maxLength: CURSOR_MAX_LENGTH }), 'must be a next_cursor the service returned');

/** The page size a listing's `limit` asks for. */
export function pageSize(limit: string | undefined): number {
  return limit === undefined ? DEFAULT_PAGE_SIZE : Number(limit);
}

/** A ban in an example: one that runs out. */
const EXAMPLE_ADMIN_USER = {
  id: EXAMPLE_USER.id,
  username: EXAMPLE_USER.username,
  email: EXAMPLE_USER.email,
  phone: null,
  is_email_verified: true,
  is_phone_verified: false,
  created_at: '2025-01-15T09:30:00.000Z',
  last_sign_in_at: '2025-01-20T18:02:11.000Z',
  has_password: true,
  mfa_enabled: false,
  passkeys: 1,
  identities: [],
  banned: false,
  banned_until: null,
  ban_reason: null,
};

/**
 * AdminUser (docs/admin-api.md#adminuser): the User members and what an operator needs to help
 * the user, exactly these members.
 */
export const AdminUserSchema = Type.Object(
  {
    ...UserSchema.properties,
    created_at: Type.String({ format: 'date-time' }),
    last_sign_in_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    has_password: Type.Boolean(),
    mfa_enabled: Type.Boolean(),
    passkeys: Type.Integer({ minimum: 0, description: 'How many passkeys the user has.' }),
    identities: Type.Array(Type.Object({ provider: Type.String(), email: Type.Union([Type.String(), Type.Null()]) }, strict), {
      description: 'The accounts at identity providers linked to the user.',
    }),
    banned: Type.Boolean({ description: 'True while a ban is in force.' }),
    banned_until: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description: 'When the ban in force ends; null with banned true: indefinite.' }),
    ban_reason: Type.Union([Type.String(), Type.Null()]),
  },
  { $id: 'AdminUser', title: 'AdminUser', ...strict, examples: [EXAMPLE_ADMIN_USER] },
);
export type AdminUser = Static<typeof AdminUserSchema>;

/** The wire AdminUser of a row at `now`: the ban members are those of the ban in force at `now`, else false and nulls. */
export function toAdminUser(row: AdminUserRow, now: Date): AdminUser {
  const banned = banInForce(row, now);
  return {
    ...toUser(row),
    created_at: row.created_at.toISOString(),
    last_sign_in_at: row.last_sign_in_at === null ? null : row.last_sign_in_at.toISOString(),
    has_password: row.has_password,
    mfa_enabled: row.mfa_enabled,
    passkeys: row.passkeys,
    identities: row.identities,
    banned,
    banned_until: banned && row.banned_until !== null ? row.banned_until.toISOString() : null,
    ban_reason: banned ? row.ban_reason : null,
  };
}

export const ListUsersQuerySchema = Type.Object(
  {
    query: Type.Optional(
      // No NUL: PostgreSQL text cannot hold one (the statement would fail, not match nothing).
      withRule(Type.String({ minLength: 1, maxLength: EMAIL_MAX_LENGTH, pattern: '^[^\\u0000]*$', examples: ['ali'] }), `must be 1 to ${EMAIL_MAX_LENGTH} characters, without NUL`),
    ),
    limit: Type.Optional(LimitValue),
    cursor: Type.Optional(CursorValue),
  },
  strict,
);

export const ListUsersResponseSchema = Type.Object(
  { users: Type.Array(AdminUserSchema), next_cursor: Type.Union([Type.String(), Type.Null()]) },
  { title: 'AdminUserList', ...strict, examples: [{ users: [EXAMPLE_ADMIN_USER], next_cursor: EXAMPLE_CURSOR }] },
);

const AdminUsername = withRule(
  Type.String({ minLength: USERNAME_MIN_LENGTH, maxLength: USERNAME_MAX_LENGTH, pattern: '^[a-zA-Z0-9_]+$' }),
  `must be ${USERNAME_MIN_LENGTH} to ${USERNAME_MAX_LENGTH} letters, digits or underscores`,
);
const AdminPhone = withRule(Type.String({ pattern: '^[+]?[0-9 ()-]{8,24}$' }), 'must be a phone number: 8 to 24 digits, spaces, hyphens or parentheses, after an optional +');

/** CreateUserRequest (docs/admin-api.md#create-a-user): the sign-up members, the password optional, and the email's verification. */
export const CreateUserRequestSchema = Type.Object(
  {
    username: AdminUsername,
    email: Type.Optional(EmailAddressSchema),
    phone: Type.Optional(AdminPhone),
    password: Type.Optional(NewPasswordSchema),
    is_email_verified: Type.Optional(Type.Boolean()),
  },
  {
    title: 'AdminCreateUserRequest',
    ...strict,
    anyOf: [{ required: ['email'] }, { required: ['phone'] }],
    examples: [{ username: 'carol', email: 'carol@example.com', is_email_verified: true }],
  },
);
export type CreateUserRequest = Static<typeof CreateUserRequestSchema>;

/** UpdateUserRequest (docs/admin-api.md#update-a-user): each member optional; `email` and `phone` may be null. */
export const UpdateUserRequestSchema = Type.Object(
  {
    username: Type.Optional(AdminUsername),
    email: Type.Optional(Type.Union([EmailAddressSchema, Type.Null()])),
    phone: Type.Optional(Type.Union([AdminPhone, Type.Null()])),
    is_email_verified: Type.Optional(Type.Boolean()),
    is_phone_verified: Type.Optional(Type.Boolean()),
  },
  { title: 'AdminUpdateUserRequest', ...strict, examples: [{ email: 'alice@example.org', is_email_verified: true }] },
);
export type UpdateUserRequest = Static<typeof UpdateUserRequestSchema>;

/** BanRequest (docs/admin-api.md#ban-a-user). */
export const BanRequestSchema = Type.Object(
  {
    until: Type.Optional(withRule(Type.String({ format: 'date-time' }), 'must be a date and time (RFC 3339) in the future')),
    reason: Type.Optional(withRule(Type.String({ minLength: 1, maxLength: BAN_REASON_MAX_LENGTH }), `must be 1 to ${BAN_REASON_MAX_LENGTH} characters`)),
  },
  { title: 'AdminBanRequest', ...strict, examples: [{ until: '2099-01-01T00:00:00Z', reason: 'spam' }, {}] },
);
export type BanRequest = Static<typeof BanRequestSchema>;

/**
 * The body of an operation that takes none: absent, or `{}` (docs/admin-api.md#conventions);
 * any member is refused. An absent body is read as `{}` ({@link emptyBodyDefault}).
 */
export const EmptyBodySchema = Type.Object({}, { ...strict, examples: [{}] });

/** Session of the admin API: the Session of docs/api.md without `current` (no session is the caller's). */
export const AdminSessionSchema = Type.Omit(SessionSchema, ['current'], { $id: 'AdminSession', title: 'AdminSession', ...strict });
export type AdminSession = Static<typeof AdminSessionSchema>;

/** The sessions of the public reference's example, without `current`. */
const EXAMPLE_ADMIN_SESSIONS = (SessionsResponseSchema.examples as { sessions: Session[] }[])[0]!.sessions.map(({ current: _current, ...session }) => session);

export const AdminSessionsResponseSchema = Type.Object(
  { sessions: Type.Array(AdminSessionSchema) },
  { title: 'AdminSessionList', ...strict, examples: [{ sessions: EXAMPLE_ADMIN_SESSIONS }] },
);

/** The wire AdminSession of a row. */
export function toAdminSession(row: SessionRow): AdminSession {
  const { current: _current, ...session } = toSession(row, '');
  return session;
}

const EXAMPLE_AUDIT_ENTRY = {
  id: '9c1e2d3f-4a5b-4c6d-8e7f-0a1b2c3d4e5f',
  at: '2025-01-21T08:15:42.000Z',
  key_id: EXAMPLE_KEY_ID,
  key_name: 'support-backend',
  action: 'user.ban',
  user_id: EXAMPLE_USER.id,
  ip: '10.0.4.12',
  request_id: '3b9a1c2d-7e8f-4a0b-9c1d-2e3f4a5b6c7d',
  details: { until: '2025-02-21T00:00:00.000Z', reason: 'spam', sessions_revoked: 2 },
};

/** AuditEntry (docs/admin-api.md#audit-log), exactly these members. */
export const AuditEntrySchema = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    at: Type.String({ format: 'date-time' }),
    key_id: Type.Union([Type.String({ format: 'uuid' }), Type.Null()], { description: 'The API key that made the change; null for an operator command.' }),
    key_name: Type.String({ description: 'The key\'s name; `cli` for an operator command.' }),
    action: Type.String(),
    user_id: Type.Union([Type.String({ format: 'uuid' }), Type.Null()]),
    ip: Type.Union([Type.String(), Type.Null()]),
    request_id: Type.Union([Type.String(), Type.Null()], { description: 'The X-Request-Id of the answer that made the change.' }),
    details: Type.Object({}, { additionalProperties: true, description: 'Facts of the change; never a password, secret or code.' }),
  },
  { $id: 'AuditEntry', title: 'AuditEntry', ...strict, examples: [EXAMPLE_AUDIT_ENTRY] },
);
export type AuditEntry = Static<typeof AuditEntrySchema>;

/** The wire AuditEntry of a row. */
export function toAuditEntry(row: AuditEntryRow): AuditEntry {
  return {
    id: row.id,
    at: row.at.toISOString(),
    key_id: row.key_id,
    key_name: row.key_name,
    action: row.action,
    user_id: row.user_id,
    ip: row.ip,
    request_id: row.request_id,
    details: row.details,
  };
}

export const ListAuditQuerySchema = Type.Object({ user_id: Type.Optional(UuidValue), limit: Type.Optional(LimitValue), cursor: Type.Optional(CursorValue) }, strict);

export const ListAuditResponseSchema = Type.Object(
  { entries: Type.Array(AuditEntrySchema), next_cursor: Type.Union([Type.String(), Type.Null()]) },
  { title: 'AuditEntryList', ...strict, examples: [{ entries: [EXAMPLE_AUDIT_ENTRY], next_cursor: null }] },
);

/** `GET /admin/v0/webhooks`: every endpoint, oldest first; never a secret. */
export const WebhookListResponseSchema = Type.Object({ webhooks: Type.Array(EndpointSchema) }, { title: 'WebhookEndpointList', ...strict });

/** `POST /admin/v0/webhooks`: the new endpoint and its secret, shown only here. */
export const CreatedWebhookResponseSchema = Type.Object(
  { webhook: EndpointSchema, secret: Type.String({ description: 'The signing secret (whsec_...): shown only in this answer and at rotation.' }) },
  { title: 'CreatedWebhookEndpoint', ...strict },
);

/** `PATCH /admin/v0/webhooks/{webhook_id}`: the endpoint as changed. */
export const WebhookResponseSchema = Type.Object({ webhook: EndpointSchema }, { title: 'WebhookEndpointResponse', ...strict });

/** `POST /admin/v0/webhooks/{webhook_id}/rotate-secret`: the new secret, shown only here. */
export const RotatedSecretResponseSchema = Type.Object(
  { secret: Type.String({ description: 'The new signing secret (whsec_...); the replaced one also signs for 24 hours.' }) },
  { title: 'RotatedWebhookSecret', ...strict },
);

/** `GET /admin/v0/webhooks/{webhook_id}/deliveries`: a page of deliveries, newest first. */
export const DeliveryListResponseSchema = Type.Object(
  { deliveries: Type.Array(DeliverySchema), next_cursor: Type.Union([Type.String(), Type.Null()]) },
  { title: 'WebhookDeliveryList', ...strict },
);
