import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Db } from '../../db/db.js';
import { errorResponses } from '../../errors.js';
import type { AdminAuth } from './admin-auth.js';
import { listAdminAudit } from './admin-audit.repo.js';
import { ADMIN_SECURITY, ADMIN_TAGS } from './admin-openapi.js';
import { ListAuditQuerySchema, ListAuditResponseSchema, pageSize, toAuditEntry, type AuditEntry } from './admin.schemas.js';
import { pageOf, positionAfter } from './keyset-cursor.js';
import '../../plugins/route-config.js';

/** Reading the audit log (docs/admin-api.md#audit-log); nothing changes an entry. */
export interface AdminAuditService {
  /**
   * A page of entries newest first, all or those about `userId`; `nextCursor` null exactly when
   * no entry follows the page.
   * @throws AppError `admin.validation_failed` (400) for a cursor the service did not issue for this listing.
   */
  list(c: { userId: string | undefined; limit: number; cursor: string | undefined }): Promise<{ entries: AuditEntry[]; nextCursor: string | null }>;
}

/** Builds the {@link AdminAuditService}. */
export function createAdminAuditService(deps: { db: Db; cursorKey: Buffer }): AdminAuditService {
  const { db, cursorKey } = deps;
  return {
    async list(c) {
      const after = positionAfter(cursorKey, 'audit', c.cursor);
      // One more than a page: whether it comes back says whether a next page exists.
      const page = pageOf(cursorKey, 'audit', await listAdminAudit(db, { userId: c.userId, after, limit: c.limit + 1 }), c.limit);
      return { entries: page.items.map(toAuditEntry), nextCursor: page.nextCursor };
    },
  };
}

/** `GET /admin/v0/audit` (docs/admin-api.md#audit-log). The API has no route that changes an entry. */
export function adminAuditRoutes(deps: { audit: AdminAuditService }): (auth: AdminAuth) => FastifyPluginAsyncTypebox {
  const { audit } = deps;
  return (auth) => async (app) => {
    app.get(
      '/audit',
      {
        config: { validationError: 'admin.validation_failed' },
        onRequest: auth.requireScope('audit:read'),
        schema: {
          summary: 'The audit log, newest first',
          operationId: 'listAuditEntries',
          tags: [ADMIN_TAGS.audit.name],
          security: ADMIN_SECURITY,
          querystring: ListAuditQuerySchema,
          response: { 200: ListAuditResponseSchema, ...errorResponses(400, 401, 403, 429) },
        },
      },
      async (request) => {
        const { user_id: userId, limit, cursor } = request.query;
        const page = await audit.list({ userId: userId?.toLowerCase(), limit: pageSize(limit), cursor });
        return { entries: page.entries, next_cursor: page.nextCursor };
      },
    );
  };
}
