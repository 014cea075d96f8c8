import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { Clock } from '../../clock.js';
import { AppError, errorResponses } from '../../errors.js';
import { CreateWebhookRequestSchema, DeliveriesQuerySchema, UpdateWebhookRequestSchema } from '../webhooks/webhooks.schemas.js';
import { WebhookRequestError, type WebhooksService } from '../webhooks/webhooks.service.js';
import { actorOf, type AdminAuth } from './admin-auth.js';
import { ADMIN_SECURITY, ADMIN_TAGS } from './admin-openapi.js';
import { emptyBodyDefault, KEYED } from './admin-users.routes.js';
import {
  CreatedWebhookResponseSchema,
  DeliveryListResponseSchema,
  EmptyBodySchema,
  RotatedSecretResponseSchema,
  WebhookDeliveryParamsSchema,
  WebhookIdParamsSchema,
  WebhookListResponseSchema,
  WebhookResponseSchema,
} from './admin.schemas.js';
import { auditedAs } from './operator-actions.js';
import '../../plugins/route-config.js';

/**
 * Runs a call of the webhook service, its refusals as the admin API's errors: `validation_failed`
 * as 400 `admin.validation_failed`, `not_found` as 404 `admin.not_found`, with the service's message.
 */
async function answering<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (!(err instanceof WebhookRequestError)) throw err;
    throw new AppError(err.reason === 'not_found' ? 'admin.not_found' : 'admin.validation_failed', { message: err.message, cause: err });
  }
}

/**
 * The admin API's webhook routes (docs/admin-api.md#webhooks), scope `webhooks`: list, add,
 * change and remove endpoints, rotate a secret, list an endpoint's deliveries and retry one. Each
 * change is recorded in the audit log in its own transaction ({@link auditedAs}); a secret is
 * answered only by the add and rotate operations, never listed nor recorded.
 */
export function adminWebhooksRoutes(deps: { webhooks: WebhooksService; clock: Clock }): (auth: AdminAuth) => FastifyPluginAsyncTypebox {
  const { webhooks, clock } = deps;
  return (auth) => async (app) => {
    const config = { validationError: 'admin.validation_failed' as const };
    const keyed = { config, onRequest: auth.requireScope('webhooks') };
    const tags = [ADMIN_TAGS.webhooks.name];

    app.get(
      '/webhooks',
      {
        ...keyed,
        schema: {
          summary: 'Every webhook endpoint, oldest first; never a secret',
          operationId: 'listWebhooks',
          tags,
          security: ADMIN_SECURITY,
          response: { 200: WebhookListResponseSchema, ...errorResponses(...KEYED) },
        },
      },
      async () => ({ webhooks: await webhooks.list() }),
    );

    app.post(
      '/webhooks',
      {
        ...keyed,
        schema: {
          summary: 'Add a webhook endpoint, enabled; its secret is answered only here',
          operationId: 'createWebhook',
          tags,
          security: ADMIN_SECURITY,
          body: CreateWebhookRequestSchema,
          response: { 201: CreatedWebhookResponseSchema, ...errorResponses(400, ...KEYED, 413) },
        },
      },
      async (request, reply) => {
        const created = await answering(() => webhooks.add({ url: request.body.url, eventTypes: request.body.event_types }, auditedAs(actorOf(request), clock)));
        return reply.code(201).send(created);
      },
    );

    app.patch(
      '/webhooks/:webhook_id',
      {
        ...keyed,
        schema: {
          summary: 'Change a webhook endpoint\'s URL, event types or enabled state',
          operationId: 'updateWebhook',
          tags,
          security: ADMIN_SECURITY,
          params: WebhookIdParamsSchema,
          body: UpdateWebhookRequestSchema,
          response: { 200: WebhookResponseSchema, ...errorResponses(400, ...KEYED, 404, 413) },
        },
      },
      async (request) => {
        const { url, event_types: eventTypes, enabled } = request.body;
        const webhook = await answering(() => webhooks.update(request.params.webhook_id, { url, eventTypes, enabled }, auditedAs(actorOf(request), clock)));
        return { webhook };
      },
    );

    app.delete(
      '/webhooks/:webhook_id',
      {
        ...keyed,
        preValidation: emptyBodyDefault,
        schema: {
          summary: 'Remove a webhook endpoint and every delivery to it',
          operationId: 'deleteWebhook',
          tags,
          security: ADMIN_SECURITY,
          params: WebhookIdParamsSchema,
          body: EmptyBodySchema,
          response: { 204: Type.Null(), ...errorResponses(400, ...KEYED, 404, 413) },
        },
      },
      async (request, reply) => {
        await answering(() => webhooks.remove(request.params.webhook_id, auditedAs(actorOf(request), clock)));
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/webhooks/:webhook_id/rotate-secret',
      {
        ...keyed,
        preValidation: emptyBodyDefault,
        schema: {
          summary: 'Give a webhook endpoint a new secret, answered only here; the replaced one also signs for 24 hours',
          operationId: 'rotateWebhookSecret',
          tags,
          security: ADMIN_SECURITY,
          params: WebhookIdParamsSchema,
          body: EmptyBodySchema,
          response: { 200: RotatedSecretResponseSchema, ...errorResponses(400, ...KEYED, 404, 413) },
        },
      },
      async (request) => answering(() => webhooks.rotateSecret(request.params.webhook_id, auditedAs(actorOf(request), clock))),
    );

    app.get(
      '/webhooks/:webhook_id/deliveries',
      {
        ...keyed,
        schema: {
          summary: 'A webhook endpoint\'s deliveries, newest first, optionally of one status',
          operationId: 'listWebhookDeliveries',
          tags,
          security: ADMIN_SECURITY,
          params: WebhookIdParamsSchema,
          querystring: DeliveriesQuerySchema,
          response: { 200: DeliveryListResponseSchema, ...errorResponses(400, ...KEYED, 404) },
        },
      },
      async (request) => answering(() => webhooks.listDeliveries(request.params.webhook_id, request.query)),
    );

    app.post(
      '/webhooks/:webhook_id/deliveries/:delivery_id/retry',
      {
        ...keyed,
        preValidation: emptyBodyDefault,
        schema: {
          summary: 'Make a new attempt of a delivery due now, whatever its status',
          operationId: 'retryWebhookDelivery',
          tags,
          security: ADMIN_SECURITY,
          params: WebhookDeliveryParamsSchema,
          body: EmptyBodySchema,
          response: { 202: Type.Null(), ...errorResponses(400, ...KEYED, 404, 413) },
        },
      },
      async (request, reply) => {
        const { webhook_id: webhookId, delivery_id: deliveryId } = request.params;
        await answering(() => webhooks.retryDelivery(webhookId, deliveryId, auditedAs(actorOf(request), clock)));
        // No body at all (as a 204's): `send(null)` would serialize `null`.
        return reply.code(202).send(undefined as unknown as null);
      },
    );
  };
}
