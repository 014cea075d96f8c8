/**
 * What other modules may use of the webhook tables: the retention worker's purges of delivered or
 * dead deliveries and of fanned-out events, and the backlog figures the metrics read. The
 * statements stay in webhooks.repo.ts, private to this module.
 */
export { countDeliveryBacklog, oldestPendingDeliveryCreatedAt, purgeEvents, purgeFinishedDeliveries } from './webhooks.repo.js';
