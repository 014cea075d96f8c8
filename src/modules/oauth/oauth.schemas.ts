import { Type, type Static } from '@sinclair/typebox';
import { withRule } from '../../errors.js';
import type { IdentityRow } from './identities.repo.js';
import { MAX_REDIRECT_LENGTH } from './redirect-target.js';

/** The examples of the OpenAPI document. */
const EXAMPLE_REDIRECT = 'https://app.example.com/signed-in';
const EXAMPLE_IDENTITY_ID = '5d1c8e0a-7b2f-4a61-9c3e-2f4b6a8d0e17';

/** A configured provider as the providers list shows it. */
export const ProviderSchema = Type.Object(
  { id: Type.String({ pattern: '^[a-z][a-z0-9_]{0,31}$' }), name: Type.String() },
  { title: 'Provider', additionalProperties: false, examples: [{ id: 'google', name: 'Google' }] },
);

/** ProvidersResponse (docs/api.md#list-identity-providers): every configured provider, in configured order. */
export const ProvidersResponseSchema = Type.Object(
  { providers: Type.Array(ProviderSchema) },
  { title: 'ProvidersResponse', additionalProperties: false, examples: [{ providers: [{ id: 'google', name: 'Google' }, { id: 'github', name: 'GitHub' }] }] },
);

/** The `{provider}` path segment: any text; an id that names no configured provider answers 404. */
export const ProviderParamsSchema = Type.Object({ provider: Type.String({ maxLength: 64, examples: ['google'] }) }, { additionalProperties: false });

/** `redirect_to`: the app page to return to, one of OAUTH_REDIRECT_URLS or under one (docs/api.md#redirect_to). */
const RedirectToSchema = withRule(
  Type.String({ maxLength: MAX_REDIRECT_LENGTH, examples: [EXAMPLE_REDIRECT] }),
  `must be an absolute URL of at most ${MAX_REDIRECT_LENGTH} characters`,
);

/** The query of authorize (docs/api.md#authorize). */
export const AuthorizeQuerySchema = Type.Object({ redirect_to: Type.Optional(RedirectToSchema) }, { additionalProperties: false });

/**
 * The query (GET) or form (POST, `form_post`) of the callback: what the provider sends (RFC 6749
 * §4.1.2, §4.1.2.1; RFC 9207). Other parameters are allowed and ignored (providers add their
 * own), and repeated ones are kept for the checks to refuse.
 */
const param = (example: string) => Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())], { examples: [example] }));
const EXAMPLE_CALLBACK = { code: 'SplxlOBeZQQYbYS6WxSbIA', state: 'af0ifjsldkj-3rSx9cTZIEw', iss: 'https://accounts.google.com' };
export const CallbackParamsSchema = Type.Object(
  {
    code: param(EXAMPLE_CALLBACK.code),
    state: param(EXAMPLE_CALLBACK.state),
    iss: param(EXAMPLE_CALLBACK.iss),
    error: param('access_denied'),
    error_description: param('The user declined.'),
  },
  { additionalProperties: true, examples: [EXAMPLE_CALLBACK] },
);
export type CallbackParams = Static<typeof CallbackParamsSchema>;

/** LinkRequest (docs/api.md#link-an-identity-provider). */
export const LinkRequestSchema = Type.Object(
  { redirect_to: Type.Optional(RedirectToSchema) },
  { title: 'LinkRequest', additionalProperties: false, examples: [{ redirect_to: 'https://app.example.com/settings' }] },
);

/** LinkResponse: where to send the browser. */
export const LinkResponseSchema = Type.Object(
  { authorization_url: Type.String({ format: 'uri' }) },
  {
    title: 'LinkResponse',
    additionalProperties: false,
    examples: [{ authorization_url: 'https://accounts.google.com/o/oauth2/v2/auth?client_id=...&response_type=code&redirect_uri=...&scope=openid+email+profile&state=...&code_challenge=...&code_challenge_method=S256&nonce=...' }],
  },
);

/** The Identity object (docs/api.md#identity): all members present, no others. */
export const IdentitySchema = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    provider: Type.String(),
    email: Type.Union([Type.String(), Type.Null()]),
    created_at: Type.String({ format: 'date-time' }),
    last_sign_in_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  },
  {
    $id: 'Identity',
    title: 'Identity',
    additionalProperties: false,
    examples: [{ id: EXAMPLE_IDENTITY_ID, provider: 'google', email: 'alice@example.com', created_at: '2025-01-15T09:30:00.000Z', last_sign_in_at: '2025-02-01T18:04:12.000Z' }],
  },
);
export type Identity = Static<typeof IdentitySchema>;

/** The wire Identity of a stored one. */
export function toIdentity(row: IdentityRow): Identity {
  return {
    id: row.id,
    provider: row.provider,
    email: row.email,
    created_at: row.created_at.toISOString(),
    last_sign_in_at: row.last_sign_in_at === null ? null : row.last_sign_in_at.toISOString(),
  };
}

/** IdentitiesResponse (docs/api.md#list-identities). */
export const IdentitiesResponseSchema = Type.Object(
  { identities: Type.Array(IdentitySchema) },
  {
    title: 'IdentitiesResponse',
    additionalProperties: false,
    examples: [{ identities: [{ id: EXAMPLE_IDENTITY_ID, provider: 'google', email: 'alice@example.com', created_at: '2025-01-15T09:30:00.000Z', last_sign_in_at: null }] }],
  },
);

/** The `{identity_id}` path segment: any text (an id that is not a UUID names no identity: 404). */
export const IdentityIdParamsSchema = Type.Object({ identity_id: Type.String({ examples: [EXAMPLE_IDENTITY_ID] }) }, { additionalProperties: false });
