import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from 'fastify';
import { AJV_OPTIONS, BODY_LIMIT_BYTES } from './http-options.js';
import pino, { type DestinationStream } from 'pino';
import fastifyCookie from '@fastify/cookie';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { systemClock, type Clock } from './clock.js';
import type { Config } from './config.js';
import type { Db } from './db/db.js';
import { createPasswordHasher, type PasswordHasher } from './crypto/password.js';
import { registerBodyParsers } from './plugins/body-parsers.js';
import { registerErrorHandler, sendError } from './plugins/error-handler.js';
import { answerClientError, registerHttpHardening, registerResponseSecurityHeaders, setResponseSecurityHeaders, slowClientServerOptions } from './plugins/http-hardening.js';
import { registerHealthRoutes } from './plugins/health.js';
import { registerMetrics } from './plugins/metrics.js';
import { registerOpenApi } from './plugins/openapi.js';
import { prettyDestination, registerRequestLog, requestLogServerOptions } from './plugins/request-log.js';
import { createAuthMetrics, type AuthMetrics } from './metrics.js';
import { accountsRoutes } from './modules/accounts/accounts.routes.js';
import { createAccountsService } from './modules/accounts/accounts.service.js';
import { keysRoutes } from './modules/keys/keys.routes.js';
import { loadKeyStore, type KeyStore } from './modules/keys/keys.service.js';
import { createLogTransport, createSmtpTransport, type MailTransport } from './modules/mail/mail.transport.js';
import { createOutboxWorker, type OutboxWorker } from './modules/mail/outbox.worker.js';
import { demoRoutes } from './modules/demo/demo.routes.js';
import { sessionsRoutes } from './modules/sessions/sessions.routes.js';
import { createSessionsService } from './modules/sessions/sessions.service.js';
import { signInRoutes } from './modules/sign-in/sign-in.routes.js';
import { createSignInService } from './modules/sign-in/sign-in.service.js';
import { createAccessTokenService } from './modules/tokens/access-token.service.js';
import { usersRoutes } from './modules/users/users.routes.js';
import { createBreachedPasswordCheck } from './modules/users/breached-passwords.js';
import { rateLimitRules } from './modules/rate-limits/rate-limits.rules.js';
import { createCurrentPasswordCheck } from './modules/users/current-password.js';
import { createRateLimiter } from './modules/rate-limits/rate-limits.service.js';
import { createRetentionWorker, type RetentionWorker } from './modules/retention/retention.worker.js';
import { createUsersService } from './modules/users/users.service.js';
import { verificationRoutes } from './modules/verification/verification.routes.js';
import { createVerificationService } from './modules/verification/verification.service.js';
import { createOneTimeCodes } from './modules/codes/one-time-codes.service.js';
import { passwordResetRoutes } from './modules/password-reset/password-reset.routes.js';
import { emailChangeRoutes } from './modules/email-change/email-change.routes.js';
import { mfaRoutes } from './modules/mfa/mfa.routes.js';
import { createMfaService } from './modules/mfa/mfa.service.js';
import { passkeysRoutes } from './modules/passkeys/passkeys.routes.js';
import { createPasskeysService } from './modules/passkeys/passkeys.service.js';
import { createEmailChangeService } from './modules/email-change/email-change.service.js';
import { createPasswordResetService, type PasswordResetService } from './modules/password-reset/password-reset.service.js';
import { buildAdminApp, type AdminRoutes } from './admin-app.js';
import { adminAuditRoutes, createAdminAuditService } from './modules/admin/admin-audit.routes.js';
import { createAdminKeyAuthenticator } from './modules/admin/admin-keys.service.js';
import { adminUsersRoutes } from './modules/admin/admin-users.routes.js';
import { createAdminUsersService } from './modules/admin/admin-users.service.js';
import { adminWebhooksRoutes } from './modules/admin/admin-webhooks.routes.js';
import { createDeliveryWorker, type DeliveryWorker } from './modules/webhooks/delivery.worker.js';
import type { Resolver } from './modules/webhooks/webhook-sender.js';
import { createWebhooksService, type WebhooksService } from './modules/webhooks/webhooks.service.js';
import { createOAuthProviders, type OAuthProviders } from './modules/oauth/oauth-providers.js';
import { createOAuthService } from './modules/oauth/oauth.service.js';
import { oauthRoutes } from './modules/oauth/oauth.routes.js';
import { createIdentitiesService } from './modules/oauth/identities.service.js';
import { identitiesRoutes } from './modules/oauth/identities.routes.js';
import './plugins/authenticate.js';

/** Every route of the interface lives under this prefix (docs/api.md#base-path-and-version). */
export const API_PREFIX = '/auth/v0';

export { AJV_OPTIONS, BODY_LIMIT_BYTES } from './http-options.js';

/** What {@link buildApp} needs. Everything but `config` and `db` has a production default. */
export interface AppDeps {
  readonly config: Config;
  /** An open database whose schema is current (see `migrate`). buildApp does not close it. */
  readonly db: Db;
  readonly clock?: Clock;
  /** Defaults to argon2id with `config.argon2`; tests pass a cheap one. */
  readonly passwordHasher?: PasswordHasher;
  /** Defaults to SMTP when `config.smtp` is set, else the log transport. */
  readonly mailTransport?: MailTransport;
  /** Defaults to the signing and retired keys named by the configuration. */
  readonly keys?: KeyStore;
  /** A logger from {@link createLogger} (tests capture output with one); defaults to stdout at `config.logLevel`. */
  readonly logger?: FastifyBaseLogger;
  /** Start the outbox worker when the app is ready (default true). */
  readonly startOutboxWorker?: boolean;
  /** Start the retention worker's timers when the app is ready (default true). */
  readonly startRetentionWorker?: boolean;
  /** Start the webhook delivery worker when the app is ready (default true). */
  readonly startWebhookWorker?: boolean;
  /** For tests: how webhook hosts resolve (default `dns.lookup`) and an attempt's time limit (default 10 s). */
  readonly webhookDelivery?: { readonly resolve?: Resolver; readonly attemptTimeoutMs?: number };
  /** Prometheus metrics in a registry of this app's own; defaults to a fresh one with the process metrics. */
  readonly metrics?: AuthMetrics;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The in-process email outbox worker (tests call `runOnce()` to deliver deterministically). */
    outbox: OutboxWorker;
    /** The key store: signing key, verification keys and JWKS. */
    keys: KeyStore;
    /** The retention worker (tests call `runOnce()` and `eraseSealedSuccessors()` to purge deterministically). */
    retention: RetentionWorker;
    /** Password reset (a request's work is the outbox worker's: tests call `outbox.runOnce()`). */
    passwordReset: PasswordResetService;
    /**
     * The admin API (docs/admin-api.md), an app of its own for the admin listener; null when
     * ADMIN_PORT is unset. `serve` listens on it; tests call `admin.inject()`. Ready and closed with this app.
     */
    admin: FastifyInstance | null;
    /** The webhook delivery worker (tests call `runOnce()` to fan out and deliver deterministically). */
    webhookDelivery: DeliveryWorker;
    /** Webhook endpoint management, behind the CLI and the admin API's `/admin/v0/webhooks` routes. */
    webhooks: WebhooksService;
    /** The configured identity providers (discovery runs from `ready` to `close`). */
    oauthProviders: OAuthProviders;
  }
}



/** Log serialiser for requests: method and path only. The query string can carry a verification code. */
function requestSerializer(req: { method: string; url: string; ip?: string }): Record<string, unknown> {
  const q = req.url.indexOf('?');
  return { method: req.method, path: q === -1 ? req.url : req.url.slice(0, q), ip: req.ip };
}

/**
 * The service's pino logger: JSON lines, request paths without query strings, and the headers
 * that carry secrets redacted (ASVS 5.0 V16.2.5). Tests pass a `destination` to capture lines.
 */
export function createLogger(level: string, destination?: DestinationStream): FastifyBaseLogger {
  const options = {
    level,
    redact: { paths: ['req.headers.authorization', 'req.headers.cookie', 'res.headers["set-cookie"]'], censor: '[redacted]' },
    serializers: { req: requestSerializer },
  };
  // A terminal gets pino-pretty; everything else (files, pipes, log collectors) JSON lines.
  const target = destination ?? (process.stdout.isTTY ? prettyDestination() : undefined);
  return target === undefined ? pino(options) : pino(options, target);
}

/**
 * Builds the whole service as a Fastify instance (STYLE: external plugins, then services, then
 * routes). It never listens and never migrates; `main.ts` does both, tests call `inject()`.
 * The outbox worker, the rate-limit purge and the retention worker start on `ready` and stop on
 * `close`.
 *
 * @throws when the signing key cannot be loaded.
 */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config, db } = deps;
  const clock = deps.clock ?? systemClock;
  const app = Fastify({
    loggerInstance: deps.logger ?? createLogger(config.logLevel),
    ajv: AJV_OPTIONS,
    bodyLimit: BODY_LIMIT_BYTES,
    trustProxy: config.trustProxy,
    // Requests that arrive while the server closes are answered 503 by the onRequest hook below,
    // in the service's shape and with its headers; Fastify's own fast path would bypass both.
    return503OnClosing: false,
    // Errors Fastify raises before routing (a path that cannot be percent-decoded) bypass the
    // error handler. Such a path names no resource: 404. Only the error code is logged; the
    // message would carry the URL, query string (and so a verification code) included.
    // Hooks do not run on this path, so the common headers are set here.
    frameworkErrors: (error, request, reply) => {
      request.log.info({ errorCode: error.code }, 'rejected undecodable URL');
      setResponseSecurityHeaders(reply as FastifyReply);
      void sendError(reply as FastifyReply, 'request.not_found');
    },
    clientErrorHandler: answerClientError,
    ...slowClientServerOptions(),
    ...requestLogServerOptions(),
  }).withTypeProvider<TypeBoxTypeProvider>();

  // External plugins and cross-cutting behaviour.
  registerErrorHandler(app);
  registerBodyParsers(app);
  registerResponseSecurityHeaders(app);
  registerRequestLog(app);
  await app.register(fastifyCookie);
  await registerHttpHardening(app, { corsOrigins: config.corsOrigins });
  app.decorateRequest('auth', null);

  // Services.
  const keys =
    deps.keys ??
    (await loadKeyStore({
      privateKeyFile: config.jwt.privateKeyFile,
      publicKeyFiles: config.jwt.publicKeyFiles,
      dataDir: config.dataDir,
      codeHmacKeyFile: config.codeHmacKeyFile,
      mfaKeyFile: config.mfaKeyFile,
      webhookKeyFile: config.webhookKeyFile,
      log: app.log,
    }));
  const hasher = deps.passwordHasher ?? (await createPasswordHasher(config.argon2));
  const transport = deps.mailTransport ?? (config.smtp !== undefined ? createSmtpTransport(config.smtp, { ca: config.smtp.ca }) : createLogTransport(app.log));
  const metrics = deps.metrics ?? createAuthMetrics({ defaultMetrics: true });
  const outbox = createOutboxWorker({
    db,
    transport,
    clock,
    log: app.log,
    metrics,
    passwordResetUrl: config.passwordResetUrl,
    // Bound late: the service is built below, and the worker only calls it once started.
    passwordResetRequest: (tx, email) => passwordReset.handleRequest(tx, email),
  });
  const onEmailQueued = (): void => outbox.nudge();
  const limiter = createRateLimiter({ db, clock, hmacKey: keys.rateLimitHmacKey, log: app.log });
  const rules = rateLimitRules(config.rateLimits);
  const accessTokens = createAccessTokenService({
    keys,
    issuer: config.jwt.issuer,
    audience: config.jwt.audience,
    ttlSeconds: config.jwt.accessTokenTtlSeconds,
    clock,
    cacheSize: config.jwt.accessTokenCacheSize,
  });
  metrics.trackAccessTokenCache(() => accessTokens.cacheStats());
  const codes = createOneTimeCodes({ clock, codeHmacKey: keys.codeHmacKey });
  const verification = createVerificationService({
    db,
    clock,
    codes,
    limiter,
    rules,
    log: app.log,
    codeTtlSeconds: config.verificationCodeTtlSeconds,
    onEmailQueued,
  });
  const breachedPasswords = config.passwordBreach.check === 'hibp' ? createBreachedPasswordCheck({ apiUrl: config.passwordBreach.apiUrl, log: app.log }) : undefined;
  const sessions = createSessionsService({
    db,
    clock,
    accessTokens,
    sessionTtlSeconds: config.sessionTtlSeconds,
    refreshReuseGraceSeconds: config.refreshReuseGraceSeconds,
    reauthMaxAgeSeconds: config.reauthMaxAgeSeconds,
    log: app.log,
    metrics,
  });
  const currentPassword = createCurrentPasswordCheck({ hasher, limiter, rules, log: app.log, sessions });
  const users = createUsersService({ db, clock, hasher, verification, codes, onEmailQueued, currentPassword, metrics, limiter, rules, breachedPasswords, sessions, log: app.log });
  const accounts = createAccountsService({ db, clock, currentPassword, onEmailQueued, metrics, log: app.log });
  const retention = createRetentionWorker({
    db,
    clock,
    log: app.log,
    retention: config.retention,
    refreshReuseGraceSeconds: config.refreshReuseGraceSeconds,
    unverifiedAccountTtlSeconds: config.unverifiedAccountTtlSeconds,
    metrics,
  });
  app.decorate('outbox', outbox);
  app.decorate('keys', keys);
  app.decorate('retention', retention);
  // What the account-recovery and account-security services share.
  const serviceDeps = { db, clock, hasher, currentPassword, limiter, rules, log: app.log, metrics, onEmailQueued };
  const passwordReset = createPasswordResetService({ ...serviceDeps, codes, codeTtlSeconds: config.oneTimeCodeTtlSeconds, breachedPasswords });
  app.decorate('passwordReset', passwordReset);
  const mfa = createMfaService({ ...serviceDeps, keys: keys.mfa, issuer: config.totpIssuer });
  const passkeys = createPasskeysService({ ...serviceDeps, rp: config.webauthn });
  const signIn = createSignInService({ ...serviceDeps, sessions, mfa, passkeys });
  const emailChange = createEmailChangeService({ ...serviceDeps, codes, codeTtlSeconds: config.oneTimeCodeTtlSeconds });
  const webhookDelivery = createDeliveryWorker({
    db,
    clock,
    log: app.log,
    metrics,
    secretKey: keys.webhookSecretKey,
    allowPrivateNetworks: config.webhooks.allowPrivateNetworks,
    ...deps.webhookDelivery,
  });
  app.decorate('webhookDelivery', webhookDelivery);
  const webhooks = createWebhooksService({ db, clock, secretKey: keys.webhookSecretKey });
  app.decorate('webhooks', webhooks);
  const oauthProviders = createOAuthProviders({ providers: config.oauth.providers, publicUrl: config.publicUrl, apiPrefix: API_PREFIX, clock, log: app.log });
  app.decorate('oauthProviders', oauthProviders);
  const oauth = createOAuthService({
    ...serviceDeps,
    providers: oauthProviders,
    sessions,
    signIn,
    redirectUrls: config.oauth.redirectUrls,
    linkVerifiedEmail: config.oauth.linkVerifiedEmail,
  });
  const identities = createIdentitiesService({ ...serviceDeps, sessions, providers: oauthProviders });

  // The admin API: the same services, on a listener of its own (docs/admin-api.md).
  let admin: FastifyInstance | null = null;
  if (config.admin.port !== undefined) {
    const adminUsers = createAdminUsersService({ ...serviceDeps, passwordReset, cursorKey: keys.adminCursorHmacKey, breachedPasswords });
    const adminRoutes: AdminRoutes[] = [
      adminUsersRoutes({ users: adminUsers }),
      adminWebhooksRoutes({ webhooks, clock }),
      adminAuditRoutes({ audit: createAdminAuditService({ db, cursorKey: keys.adminCursorHmacKey }) }),
    ];
    admin = await buildAdminApp({
      config,
      logger: app.log.child({ server: 'admin' }),
      metrics,
      authenticator: createAdminKeyAuthenticator({ db, clock, limiter, rule: rules.adminPerKey, log: app.log }),
      routes: adminRoutes,
    });
    const adminApp = admin;
    app.addHook('onReady', async () => {
      await adminApp.ready();
    });
    app.addHook('onClose', async () => {
      await adminApp.close();
    });
  }
  app.decorate('admin', admin);

  if (deps.startOutboxWorker ?? true) app.addHook('onReady', async () => outbox.start());
  app.addHook('onReady', async () => limiter.start());
  app.addHook('onReady', async () => oauthProviders.start());
  if (deps.startRetentionWorker ?? true) app.addHook('onReady', async () => retention.start());
  if (deps.startWebhookWorker ?? true) app.addHook('onReady', async () => webhookDelivery.start());
  app.addHook('onClose', async () => {
    limiter.stop();
    oauthProviders.stop();
    await retention.stop();
    await Promise.all([outbox.stop(), webhookDelivery.stop()]);
    transport.close();
  });

  // Routes. The OpenAPI document collects every route registered after it, the probes and metrics included.
  await registerOpenApi(app, { prefix: API_PREFIX });
  await registerHealthRoutes(app, { db });
  registerMetrics(app, { metrics, db, clock, serveRoute: config.metricsPort === undefined });
  await app.register(
    async (api) => {
      await api.register(usersRoutes({ users, sessions }));
      await api.register(emailChangeRoutes({ emailChange, sessions }));
      await api.register(accountsRoutes({ accounts, sessions }));
      await api.register(signInRoutes({ signIn }));
      await api.register(sessionsRoutes({ sessions }));
      await api.register(verificationRoutes({ verification }));
      await api.register(passwordResetRoutes({ passwordReset }));
      await api.register(mfaRoutes({ mfa, sessions }));
      await api.register(passkeysRoutes({ passkeys, sessions }));
      await api.register(oauthRoutes({ oauth, providers: oauthProviders, sessions, publicUrl: config.publicUrl, apiPrefix: API_PREFIX }));
      await api.register(identitiesRoutes({ identities, sessions }));
      await api.register(keysRoutes({ keys }));
      if (config.demoPage) await api.register(demoRoutes({ apiPrefix: API_PREFIX }));
    },
    { prefix: API_PREFIX },
  );
  return app;
}
