import { STATUS_CODES } from 'node:http';
import type { FastifyInstance } from 'fastify';
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import { Type } from '@sinclair/typebox';
import { errorResponses } from '../errors.js';

/** Version of the interface description (docs/api.md#base-path-and-version), the document's `info.version`. */
export const INTERFACE_VERSION = '0.1.0';

/** OpenAPI version of the generated document. 3.1 is the version whose schemas are JSON Schema (TypeBox's output, `type: ['string', 'null']` included). */
export const OPENAPI_VERSION = '3.1.0';

/** Where the document is served, below the API prefix. */
export const OPENAPI_DOCUMENT_PATH = '/openapi.json';

/** Where the API reference page (Swagger UI) is served, below the API prefix. */
export const API_REFERENCE_PATH = '/docs';

/**
 * The tags of the API reference, in the order a user meets the operations; the document lists
 * them in this order and Swagger UI shows them so. Every route names one (`tags: [TAGS.x.name]`).
 */
export const TAGS = {
  signUp: {
    name: 'Sign-up and verification',
    description: 'Create an account with a username and an email address or a phone number, then prove the email address with the 6-digit code sent to it.',
  },
  signIn: {
    name: 'Sign-in and tokens',
    description: 'Sign in with a verified account to get an access token and a refresh cookie; rotate the refresh token for a new access token; log out.',
  },
  recovery: {
    name: 'Account recovery',
    description: 'Forgot the password: ask for a 6-digit code by email, then set a new password with it. Every session ends; nobody is signed in.',
  },
  sessions: { name: 'Sessions', description: 'Every sign-in is a session: list the caller\'s sessions, revoke one, or revoke them all.' },
  account: { name: 'Account', description: 'The signed-in user: who it is, a password change, which ends every session, and the deletion of the account.' },
  secondFactor: {
    name: 'Second factor',
    description: 'TOTP from an authenticator app, with ten single-use recovery codes: set up, turn on with a code, turn off, make new recovery codes. Sign-in then asks for a code after the password.',
  },
  passkeys: {
    name: 'Passkeys',
    description: 'WebAuthn passkeys: register one while signed in, list, rename and delete them. Sign-in with a passkey (under Sign-in and tokens) needs no password and no second factor.',
  },
  identityProviders: {
    name: 'Identity providers',
    description: 'Sign in with Google, GitHub or any OpenID Provider the operator configured: start at authorize, come back through the callback with a session. Signed in, link more providers, list and unlink them.',
  },
  keys: { name: 'Keys', description: 'The public keys that verify access tokens (JWKS, RFC 7517), for the services that accept them.' },
  operations: { name: 'Operations', description: 'For operators: liveness and readiness probes, Prometheus metrics, and this document.' },
} as const;

/**
 * The reference page's logo in Swagger UI's top bar: the product's name as SVG text, white on the
 * bar's dark background (the plugin would show its own logo, Swagger UI another).
 */
const REFERENCE_LOGO_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" width="150" height="40" viewBox="0 0 150 40">' +
  '<text x="0" y="28" fill="#ffffff" font-family="system-ui, sans-serif" font-size="24" font-weight="700">Latchkey</text></svg>';

/** The reference page's icon: a key's initial on the product's blue, in place of Swagger's. */
const REFERENCE_FAVICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" width="32" height="32" viewBox="0 0 32 32">' +
  '<rect width="32" height="32" rx="6" fill="#2f6fbf"/>' +
  '<text x="16" y="23" fill="#ffffff" font-family="system-ui, sans-serif" font-size="20" font-weight="700" text-anchor="middle">L</text></svg>';

/**
 * Styles added to Swagger UI's for narrow screens. A tag's heading is one flex row (name,
 * description, toggle); below 40rem the description gets a line of its own, at full width,
 * instead of the column a few pixels wide that it is squeezed into, one letter per line. The
 * responses' "Links" column, empty in this document, is dropped there to leave the width to the
 * descriptions and examples.
 */
const REFERENCE_PAGE_CSS = `
@media (max-width: 40rem) {
  .swagger-ui .opblock-tag { flex-wrap: wrap; }
  .swagger-ui .opblock-tag > a.nostyle { flex: 1 1 auto; }
  .swagger-ui .opblock-tag > small { order: 3; flex: 1 1 100%; padding: 0.25rem 0 0; }
  .swagger-ui .responses-table .response-col_links { display: none; }
}
`;

/** Name of the refresh cookie (docs/api.md#refresh-cookie); repeated here so the document does not depend on the sessions module. */
const REFRESH_COOKIE_NAME = 'refresh_token';

/** What each status means in this service (docs/api.md#status-codes, docs/api.md#error-codes), the `description` of every response object. */
const RESPONSE_DESCRIPTIONS: Readonly<Record<string, string>> = {
  '200': 'OK.',
  '201': 'Created.',
  '204': 'Done; no body.',
  '302': 'Found: the browser goes on to the `Location` header (the identity provider\'s authorization endpoint).',
  '303': 'See Other: the browser goes on to the `Location` header (the app page the flow returns to, with `error=<code>` on failure).',
  '400': 'Validation failed: body, query or content type invalid (`auth.<operation>.validation_failed`).',
  '401': 'Missing or invalid credentials: access token, refresh cookie or password, or a sign-in not recent enough (`auth.*`).',
  '403': 'Refused: email not verified at sign-in (`auth.email_not_verified`), the user banned (`auth.user_banned`), or another user\'s session, passkey or identity (`auth.*.forbidden`).',
  '404': 'Not found: no user with this email (`auth.verify_email.user_not_found`), no such session, passkey or identity, or no such identity provider (`auth.oauth.unknown_provider`).',
  '409': 'Conflict: username, email or phone already taken, or a change the account\'s state forbids (`auth.*`).',
  '410': 'One-time code (verification or password reset) expired, wrong, or dead after too many attempts.',
  '413': 'Request body over 16 KiB (`request.body_too_large`).',
  '429': 'Rate limited (`auth.<operation>.too_many_attempts` or `auth.verify_email.rate_limited`); retry after `Retry-After` seconds.',
  '500': 'Internal error (`internal_error`); no internals in the message.',
  '503': 'Database unreachable or the instance shutting down (`service_unavailable`), or an identity provider unreachable (`auth.oauth.provider_unavailable`).',
};

/** The served document: an OpenAPI object (its own schema is the OpenAPI 3.1 specification's). */
const OpenApiDocumentSchema = Type.Object(
  { openapi: Type.Literal(OPENAPI_VERSION) },
  {
    additionalProperties: true,
    description: 'An OpenAPI 3.1 document.',
    examples: [{ openapi: OPENAPI_VERSION, info: { title: 'Latchkey', version: INTERFACE_VERSION }, paths: {} }],
  },
);

type JsonObject = { [key: string]: unknown };

function isObject(value: unknown): value is JsonObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** JSON with object keys sorted, so two schemas that differ only in key order compare equal. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (isObject(value)) {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

/** `schema` without its own `examples` (those of the members it contains are kept). */
function withoutExamples(schema: unknown): unknown {
  if (!isObject(schema)) return schema;
  const { examples: _examples, ...rest } = schema;
  return rest;
}

/**
 * Replaces every object schema that has a `title` (the spec's names: SignInRequest, Error,
 * SessionsResponse, ...) with a `$ref` to `components.schemas.<title>`, innermost first, so
 * the document names each wire shape once instead of inlining Error on every response.
 * @throws Error when two different schemas share a title (a programming error; tests build the document).
 */
function hoistTitledSchemas(node: unknown, components: JsonObject): unknown {
  if (Array.isArray(node)) return node.map((item) => hoistTitledSchemas(item, components));
  if (!isObject(node)) return node;
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(node)) out[key] = hoistTitledSchemas(value, components);
  if (typeof out.title !== 'string' || out.type !== 'object') return out;
  const name = out.title;
  const existing = components[name];
  // @fastify/swagger moves a response schema's own `examples` to the media type: a shape that is
  // a whole response somewhere (AdminUser) arrives here once with them and once without.
  if (existing !== undefined && canonicalJson(withoutExamples(existing)) !== canonicalJson(withoutExamples(out))) {
    throw new Error(`OpenAPI: two different schemas are titled "${name}"`);
  }
  if (existing === undefined || (isObject(existing) && existing.examples === undefined)) components[name] = out;
  return { $ref: `#/components/schemas/${name}` };
}

/** Where a path item's first tag comes in `names` (the document's tags in order); untagged items last. */
function tagRank(pathItem: unknown, names: readonly string[]): number {
  const first = isObject(pathItem) ? Object.values(pathItem).find(isObject) : undefined;
  const tag = Array.isArray(first?.tags) ? first.tags[0] : undefined;
  const rank = typeof tag === 'string' ? names.indexOf(tag) : -1;
  return rank === -1 ? names.length : rank;
}

/**
 * Final touches on the generated document: shared shapes become components (see
 * {@link hoistTitledSchemas}), every response gets a description of what its status means in
 * this service, 429 answers document their `Retry-After` header, and the paths come in the
 * order of their tags (a stable sort: within a tag, in the order the routes are registered).
 */
function finishDocument(document: JsonObject, variant: OpenApiVariant): JsonObject {
  const components = isObject(document.components) ? document.components : {};
  const schemas: JsonObject = isObject(components.schemas) ? components.schemas : {};
  for (const [name, schema] of Object.entries(schemas)) {
    // A component itself stays; only what it contains is hoisted.
    if (isObject(schema)) {
      const inner: JsonObject = {};
      for (const [key, value] of Object.entries(schema)) inner[key] = hoistTitledSchemas(value, schemas);
      schemas[name] = inner;
    }
  }
  const paths = isObject(document.paths) ? document.paths : {};
  for (const pathItem of Object.values(paths)) {
    if (!isObject(pathItem)) continue;
    for (const operation of Object.values(pathItem)) {
      if (!isObject(operation)) continue;
      if (isObject(operation.requestBody)) operation.requestBody = hoistTitledSchemas(operation.requestBody, schemas);
      const responses = isObject(operation.responses) ? operation.responses : {};
      for (const [status, response] of Object.entries(responses)) {
        if (!isObject(response)) continue;
        const hoisted = hoistTitledSchemas(response, schemas) as JsonObject;
        hoisted.description = variant.responseDescriptions[status] ?? STATUS_CODES[Number(status)] ?? status;
        if (status === '429') {
          hoisted.headers = { 'Retry-After': { description: 'Seconds until the limit resets.', schema: { type: 'integer', minimum: 0 } } };
        }
        responses[status] = hoisted;
      }
    }
  }
  components.schemas = Object.fromEntries(Object.entries(schemas).sort(([a], [b]) => a.localeCompare(b)));
  document.components = components;
  const tagNames = variant.tags.map((tag) => tag.name);
  document.paths = Object.fromEntries(Object.entries(paths).sort(([, a], [, b]) => tagRank(a, tagNames) - tagRank(b, tagNames)));
  return document;
}

/**
 * What tells one OpenAPI document of the service from another: the public API's (prefix
 * `/auth/v0`) and the admin API's (`/admin/v0`, on its own listener) share everything else.
 */
export interface OpenApiVariant {
  readonly info: { readonly title: string; readonly description: string };
  /** The document's tags in the order the reference page shows them. */
  readonly tags: readonly { readonly name: string; readonly description: string }[];
  /** The tag of the document's own route (`GET {prefix}/openapi.json`). */
  readonly documentTag: string;
  readonly securitySchemes: Readonly<Record<string, unknown>>;
  /** What each status means, the `description` of every response object. */
  readonly responseDescriptions: Readonly<Record<string, string>>;
  /** The reference page's `<title>`. */
  readonly pageTitle: string;
}

/** The public API's document (docs/api.md#openapi-document). */
export const PUBLIC_OPENAPI: OpenApiVariant = {
  info: {
    title: 'Latchkey',
    description:
      'Accounts and sign-in for your applications: email verification, RS256 access tokens with a JWKS, rotating refresh tokens and sessions; every error is `{code, message}`.',
  },
  tags: Object.values(TAGS),
  documentTag: TAGS.operations.name,
  securitySchemes: {
    bearerAuth: {
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'JWT',
      description: 'RS256 access token (`typ: at+jwt`) from sign-in or refresh; verify it with the JWKS.',
    },
    refreshCookie: {
      type: 'apiKey',
      in: 'cookie',
      name: REFRESH_COOKIE_NAME,
      description: 'The HttpOnly refresh cookie set by sign-in and refresh (Path=/auth/v0/refresh).',
    },
    mfaChallengeCookie: {
      type: 'apiKey',
      in: 'cookie',
      name: 'mfa_challenge',
      description: 'The HttpOnly challenge cookie a sign-in answered 403 auth.mfa_required sets (Path=/auth/v0/sign-in/mfa, 300 s).',
    },
    oauthFlowCookie: {
      type: 'apiKey',
      in: 'cookie',
      name: 'oauth_flow',
      description: 'The HttpOnly cookie authorize and link set, binding the flow to this browser (Path=/auth/v0/oauth, SameSite=Lax, 600 s, single use).',
    },
    webauthnChallengeCookie: {
      type: 'apiKey',
      in: 'cookie',
      name: 'webauthn_challenge',
      description: 'The HttpOnly challenge cookie POST /auth/v0/sign-in/passkey/options sets (Path=/auth/v0/sign-in/passkey, 300 s, single use).',
    },
  },
  responseDescriptions: RESPONSE_DESCRIPTIONS,
  pageTitle: 'Latchkey API reference',
};

/**
 * Registers the OpenAPI 3.1 document, generated by `@fastify/swagger` from the route schemas
 * (STYLE habit 2: one schema per wire shape; nothing written by hand), and serves it at
 * `GET {prefix}/openapi.json`, with a Swagger UI page at `GET {prefix}/docs`. The page's
 * scripts and styles ship inside `@fastify/swagger-ui` and are served by this process
 * (`{prefix}/docs/static/...`), so it works offline; the online validator badge is off.
 *
 * Must be awaited before any route it documents is registered, the probes and `/metrics`
 * included: the document is collected from an `onRoute` hook. Every documented route names one
 * of the variant's tags; the reference page's own routes and `schema.hide` routes (the demo
 * page) are left out.
 *
 * Schemas with an `$id` (Error, User, Session) become `components.schemas` entries under that
 * name and are referenced with `$ref`; other shapes are inlined.
 * @param options.variant which document: the public API's (default) or the admin API's.
 */
export async function registerOpenApi(app: FastifyInstance, options: { readonly prefix: string; readonly variant?: OpenApiVariant }): Promise<void> {
  const variant = options.variant ?? PUBLIC_OPENAPI;
  await app.register(fastifySwagger, {
    openapi: {
      openapi: OPENAPI_VERSION,
      info: {
        title: variant.info.title,
        version: INTERFACE_VERSION,
        description: variant.info.description,
        license: { name: 'MIT', identifier: 'MIT' },
      },
      tags: variant.tags.map((tag) => ({ name: tag.name, description: tag.description })),
      components: { securitySchemes: { ...variant.securitySchemes } as Record<string, never> },
    },
    transformObject: (documentObject) => ('openapiObject' in documentObject ? finishDocument(documentObject.openapiObject as JsonObject, variant) : documentObject.swaggerObject),
    refResolver: {
      // Shared shapes keep their own name (`#/components/schemas/Error`) instead of `def-N`.
      buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
    },
  });

  // Not awaited: the document's route and the page load with the routes registered after this
  // call, so they come last in the document and get the app's hooks added in between (the
  // metrics of every answer).
  void app.register(async (scoped) => {
    scoped.get(
      `${options.prefix}${OPENAPI_DOCUMENT_PATH}`,
      {
        schema: {
          summary: 'This document (OpenAPI 3.1)',
          operationId: 'getOpenApiDocument',
          tags: [variant.documentTag],
          response: { 200: OpenApiDocumentSchema, ...errorResponses() },
        },
      },
      // Serialised here, so that the response schema (which names only `openapi`) leaves it whole.
      async (_request, reply) => reply.type('application/json; charset=utf-8').send(JSON.stringify(app.swagger())),
    );
    const documentUrl = `${options.prefix}${OPENAPI_DOCUMENT_PATH}`;
    await scoped.register(fastifySwaggerUi, {
      routePrefix: `${options.prefix}${API_REFERENCE_PATH}`,
      // The page loads the document from the URL the README and docs/api.md give, and shows that
      // URL (the plugin's own copy, `{routePrefix}/json`, is what it would load and show
      // otherwise: `urls` takes precedence over the `url` the plugin sets).
      uiConfig: { deepLinking: true, urls: [{ url: documentUrl, name: documentUrl }] },
      // The online validator badge would call validator.swagger.io; the page must work offline.
      validatorUrl: false,
      logo: { type: 'image/svg+xml', content: Buffer.from(REFERENCE_LOGO_SVG), href: `${options.prefix}${API_REFERENCE_PATH}` },
      theme: {
        title: variant.pageTitle,
        css: [{ filename: 'latchkey.css', content: REFERENCE_PAGE_CSS }],
        favicon: [{ filename: 'favicon.svg', rel: 'icon', sizes: 'any', type: 'image/svg+xml', content: Buffer.from(REFERENCE_FAVICON_SVG) }],
      },
    });
  });
}
