import type { OpenApiVariant } from '../../plugins/openapi.js';

/** The tags of the admin API's reference, in the order the page shows them; every admin route names one. */
export const ADMIN_TAGS = {
  users: { name: 'Users', description: 'Find, create, change, ban and delete users; send a password reset; remove a lost second factor.' },
  sessions: { name: 'Sessions', description: 'A user\'s active sessions: list them, end one, or end them all.' },
  webhooks: { name: 'Webhooks', description: 'Webhook endpoints: add, change, remove, rotate a secret; list and retry their deliveries.' },
  audit: { name: 'Audit log', description: 'Every change made through this API or the operator commands, newest first.' },
  documentation: { name: 'Documentation', description: 'This document; it needs no key.' },
} as const;

/** The admin API's security scheme: an API key made by `latchkey admin-keys create`, as a Bearer token. */
export const ADMIN_SECURITY = [{ adminApiKey: [] }];

/** The admin API's OpenAPI document (docs/admin-api.md), served at `GET /admin/v0/openapi.json` on the admin listener. */
export const ADMIN_OPENAPI: OpenApiVariant = {
  info: {
    title: 'Latchkey admin API',
    description:
      "For the operator's own backend, never for browsers: on its own listener (ADMIN_HOST:ADMIN_PORT), every request with an admin API key. Every change is written to the audit log; every error is `{code, message}`.",
  },
  tags: Object.values(ADMIN_TAGS),
  documentTag: ADMIN_TAGS.documentation.name,
  securitySchemes: {
    adminApiKey: {
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'lk_admin_<id>_<secret>',
      description: 'An admin API key from `latchkey admin-keys create`, with the scope the operation names.',
    },
  },
  responseDescriptions: {
    '200': 'OK.',
    '201': 'Created.',
    '202': 'Accepted: done, its effect follows (a delivery attempt within about a second); no body.',
    '204': 'Done; no body.',
    '400': 'Validation failed: body, query or path value invalid (`admin.validation_failed`).',
    '401': 'No admin API key, or an unknown, revoked or expired one (`admin.invalid_api_key`).',
    '403': 'The key lacks the scope of the operation (`admin.insufficient_scope`).',
    '404': 'No such user (`admin.user_not_found`) or resource (`admin.not_found`).',
    '409': 'Username, email or phone already taken, or no email to send to (`admin.*`).',
    '413': 'Request body over 16 KiB (`request.body_too_large`).',
    '429': 'Too many requests with this key (`admin.too_many_requests`); retry after `Retry-After` seconds.',
    '500': 'Internal error (`internal_error`); no internals in the message.',
    '503': 'Database unreachable or the instance shutting down (`service_unavailable`).',
  },
  pageTitle: 'Latchkey admin API reference',
};
