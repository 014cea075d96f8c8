import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import * as oidc from 'openid-client';
import type { Clock } from '../../clock.js';
import type { Db, Queryable } from '../../db/db.js';
import { newRandomSecret, sha256 } from '../../crypto/secrets.js';
import { AppError, CALLBACK_ERRORS, type CallbackErrorCode } from '../../errors.js';
import { securityEvent } from '../audit/security-events.js';
import { queueUserNotice } from '../mail/notices.js';
import type { RateLimitRules } from '../rate-limits/rate-limits.rules.js';
import type { RateLimiter } from '../rate-limits/rate-limits.service.js';
import { findActiveSessionWithUser } from '../sessions/sessions.shared.js';
import type { ClientContext } from '../../plugins/client-context.js';
import type { Authenticated, IssuedTokens, SessionsService } from '../sessions/sessions.service.js';
import type { SignInService } from '../sign-in/sign-in.service.js';
import { findSignInUser, findUserByEmail, insertUser, lockUserRow, type UserRow } from '../users/users.shared.js';
import { findIdentity, linkIdentity, recordIdentitySignIn, type IdentityRow } from './identities.repo.js';
import { recordEvent, recordEvents, type NewEvent } from '../events/events.shared.js';
import { toUser } from '../users/users.schemas.js';
import { consumeFlow, insertFlow, type ConsumedFlow, type FlowMode } from './oauth-flows.repo.js';
import { ProviderFailure, type OAuthProviders, type ProviderProfile } from './oauth-providers.js';
import type { OAuthProviderSettings } from './oauth.config.js';
import { redirectTarget, withError } from './redirect-target.js';
import { derivedUsername, usernameWithSuffix } from './username.js';

/** The `identity.linked` event of a newly linked identity (docs/api.md#events-and-webhooks). */
function linkedEvent(identity: IdentityRow): NewEvent {
  return { type: 'identity.linked', data: { user_id: identity.user_id, identity_id: identity.id, provider: identity.provider } };
}

/** How long a flow lives, in seconds: the `oauth_flow` cookie's `Max-Age` (docs/api.md#authorize). */
export const FLOW_TTL_SECONDS = 600;
/** The `amr` (RFC 8176) of a session signed in through an identity provider. */
export const OAUTH_AMR: readonly string[] = Object.freeze(['oauth']);
/**
 * Usernames tried for a new account before giving up: the derived one, then this many less one
 * with 4 random digits appended; with 10 000 suffixes, several collisions in a row mean a
 * crowded name, and the sign-up fails as unavailable rather than loop.
 */
const MAX_USERNAME_TRIES = 8;
/** Passes of the sign-in steps when a parallel callback created the identity or the user between the look-up and the insert. */
const MAX_SIGN_IN_PASSES = 3;

/** A flow that started: where to send the browser, and the `oauth_flow` cookie's value. */
export interface StartedFlow {
  readonly authorizationUrl: string;
  readonly browserSecret: string;
  readonly maxAgeSeconds: number;
}

/** What a callback answers: the 303's location, and a session or a second-step challenge to set as cookies. */
export interface CallbackOutcome {
  readonly location: string;
  readonly session?: IssuedTokens;
  readonly mfaChallenge?: { readonly value: string; readonly maxAgeSeconds: number };
}

/** Dependencies of {@link createOAuthService}. */
export interface OAuthDeps {
  readonly db: Db;
  readonly clock: Clock;
  readonly providers: OAuthProviders;
  readonly sessions: Pick<SessionsService, 'requireRecentSignIn'>;
  /** The end of every sign-in (ban, verified email, second factor, session). */
  readonly signIn: Pick<SignInService, 'finishSignIn'>;
  readonly limiter: RateLimiter;
  readonly rules: Pick<RateLimitRules, 'oauthFlowsPerIp'>;
  readonly log: FastifyBaseLogger;
  /** OAUTH_REDIRECT_URLS. */
  readonly redirectUrls: readonly string[];
  /** OAUTH_LINK_VERIFIED_EMAIL. */
  readonly linkVerifiedEmail: boolean;
  readonly onEmailQueued: () => void;
}

/**
 * Sign-in with an identity provider (docs/api.md#sign-in-with-an-identity-provider): flows that
 * start at authorize or link and end at the callback. OAuth 2.0 (RFC 6749) with PKCE (RFC 7636),
 * OpenID Connect Core 1.0, RFC 9207; RFC 9700 (OAuth 2.0 Security Best Current Practice).
 */
export interface OAuthService {
  /**
   * Starts a sign-in flow: checks the provider and `redirectTo`, counts the attempt per client,
   * builds the authorization request (random `state`, PKCE verifier, OpenID nonce) and stores
   * the flow for {@link FLOW_TTL_SECONDS}, bound to a new browser secret (the `oauth_flow` cookie).
   * @throws AppError `auth.oauth.unknown_provider` (404), `auth.oauth.invalid_redirect` (400),
   *   `auth.oauth.too_many_attempts` (429, Retry-After), `auth.oauth.provider_unavailable` (503).
   */
  authorize(providerId: string, redirectTo: string | undefined, client: ClientContext): Promise<StartedFlow>;
  /**
   * Starts a link flow for the caller, as {@link authorize} does, after checking that the
   * caller's session signed in recently; the callback links the identity to the caller.
   * @throws as {@link authorize}, and AppError `auth.reauthentication_required` (401).
   */
  link(caller: Authenticated, providerId: string, redirectTo: string | undefined, client: ClientContext): Promise<StartedFlow>;
  /**
   * Ends a flow at the provider's callback: consumes the flow of `state` bound to
   * `browserSecret` (one guarded UPDATE), completes the exchange with the provider, then signs
   * in or links (docs/api.md#callback). Every outcome after the flow is consumed is a redirect
   * to the flow's `redirect_to`, with `error=<code>` on failure.
   * @throws AppError `auth.oauth.unknown_provider` (404); `auth.oauth.invalid_state` (400) for a
   *   missing cookie or state, or a state that names no live flow of this provider and browser
   *   (nothing changes then).
   */
  callback(providerId: string, c: { query: string; state: string | undefined; browserSecret: string | undefined }, client: ClientContext): Promise<CallbackOutcome>;
}

/** A callback's refusal, answered as the redirect's `error` code. */
class CallbackRefusal extends Error {
  constructor(readonly code: CallbackErrorCode) {
    super(code);
  }
}

/** The codes of {@link CALLBACK_ERRORS} that a sign-in's own refusals (AppError) may carry. */
function callbackCodeOf(err: AppError): CallbackErrorCode | undefined {
  return Object.hasOwn(CALLBACK_ERRORS, err.code) ? (err.code as CallbackErrorCode) : undefined;
}

/** What may be logged of a provider's failure: messages and codes, never a body (which may hold a token). */
function describeFailure(err: unknown): Record<string, unknown> {
  const describe = (e: unknown): Record<string, unknown> | undefined =>
    e instanceof Error ? { message: e.message, code: (e as { code?: unknown }).code, status: (e as { status?: unknown }).status } : undefined;
  return { ...describe(err), cause: describe((err as { cause?: unknown }).cause) };
}

/** Builds the {@link OAuthService}. */
export function createOAuthService(deps: OAuthDeps): OAuthService {
  const { db, clock, providers, sessions, signIn: signInService, limiter, rules, log, redirectUrls, linkVerifiedEmail, onEmailQueued } = deps;

  const providerOf = (id: string): OAuthProviderSettings => {
    const p = providers.get(id);
    if (p === undefined) throw new AppError('auth.oauth.unknown_provider');
    return p;
  };

  /** The checks and the flow shared by authorize and link, in the order of docs/api.md#authorize. */
  const start = async (p: OAuthProviderSettings, redirectRaw: string | undefined, mode: FlowMode, client: ClientContext): Promise<StartedFlow> => {
    const redirectTo = redirectTarget(redirectRaw, redirectUrls);
    if (redirectTo === undefined) throw new AppError('auth.oauth.invalid_redirect');
    if (client.ip !== null) {
      const ip = client.ip;
      await limiter.enforce(rules.oauthFlowsPerIp, ip, 'auth.oauth.too_many_attempts', () => securityEvent(log, 'oauth.rate_limited', { ip, provider: p.id }));
    }
    const state = oidc.randomState();
    const codeVerifier = oidc.randomPKCECodeVerifier();
    const nonce = p.type === 'oidc' ? oidc.randomNonce() : undefined;
    const url = await providers.authorizationUrl(p, { state, codeChallenge: await oidc.calculatePKCECodeChallenge(codeVerifier), nonce });
    const browserSecret = newRandomSecret();
    const now = clock.now();
    await insertFlow(db, {
      id: randomUUID(),
      provider: p.id,
      stateHash: sha256(state),
      browserHash: sha256(browserSecret),
      codeVerifier,
      nonce: nonce ?? null,
      redirectTo,
      mode,
      now,
      expiresAt: new Date(now.getTime() + FLOW_TTL_SECONDS * 1000),
    });
    return { authorizationUrl: url.href, browserSecret, maxAgeSeconds: FLOW_TTL_SECONDS };
  };

  /** {@link queueUserNotice} of `kind` about `user` in `tx`, naming the provider; @returns whether one was queued. */
  const identityNotice = (tx: Queryable, user: UserRow, kind: 'identity_linked', p: OAuthProviderSettings, client: ClientContext): Promise<boolean> =>
    queueUserNotice(tx, user, { kind, at: clock.now(), client, details: [`Provider: ${p.name}`] });

  /**
   * Creates a user for a provider's first sign-in (docs/api.md#sign-in-mode, step 4) with the
   * identity, in one transaction: the email verified, no phone, no password, a username
   * derived from the profile. A taken username is tried again with a suffix.
   * @returns the new user's id; undefined when the identity was created meanwhile (start over).
   * @throws CallbackRefusal `auth.oauth.account_exists` when a parallel sign-up took the address.
   */
  const createUser = async (p: OAuthProviderSettings, profile: ProviderProfile & { email: string }): Promise<string | undefined> => {
    const base = derivedUsername(profile.preferredUsername ?? profile.email.slice(0, profile.email.lastIndexOf('@')));
    for (let attempt = 0; attempt < MAX_USERNAME_TRIES; attempt++) {
      const username = attempt === 0 ? base : usernameWithSuffix(base);
      const now = clock.now();
      try {
        return await db.transaction(async (tx) => {
          const user = await insertUser(tx, { id: randomUUID(), username, email: profile.email, phone: null, password_hash: null, is_email_verified: true }, now);
          const { identity, created } = await linkIdentity(tx, { id: randomUUID(), userId: user.id, provider: p.id, issuer: profile.issuer, subject: profile.subject, email: profile.email, now });
          if (!created) throw new CallbackRefusal('auth.oauth.identity_taken');
          await recordEvents(tx, [{ type: 'user.created', data: { user: toUser(user) } }, linkedEvent(identity)], now);
          return user.id;
        });
      } catch (err) {
        if (err instanceof CallbackRefusal) return undefined;
        if (err instanceof AppError && err.code === 'auth.sign_up.username_taken') continue;
        if (err instanceof AppError && err.code === 'auth.sign_up.email_taken') throw new CallbackRefusal('auth.oauth.account_exists');
        throw err;
      }
    }
    throw new AppError('service_unavailable', { message: 'No free username could be derived for the new account; try again.' });
  };

  /**
   * Links the identity to the existing user with the provider's email (OAUTH_LINK_VERIFIED_EMAIL),
   * only while that user still has that address, verified, with a notice.
   * @returns the user's id; undefined when the identity was created meanwhile (start over).
   * @throws CallbackRefusal `auth.oauth.account_exists` when the user's address changed or is unverified.
   */
  const linkToEmailOwner = async (p: OAuthProviderSettings, profile: ProviderProfile, owner: UserRow, client: ClientContext): Promise<string | undefined> => {
    const outcome = await db.transaction(async (tx) => {
      const user = await lockUserRow(tx, owner.id);
      if (user === undefined || user.email !== profile.email || !user.is_email_verified) return 'changed' as const;
      const { identity, created } = await linkIdentity(tx, { id: randomUUID(), userId: user.id, provider: p.id, issuer: profile.issuer, subject: profile.subject, email: profile.email, now: clock.now() });
      if (!created) return 'raced' as const;
      await recordEvent(tx, linkedEvent(identity), clock.now());
      return { userId: user.id, identityId: identity.id, noticed: await identityNotice(tx, user, 'identity_linked', p, client) };
    });
    if (outcome === 'changed') throw new CallbackRefusal('auth.oauth.account_exists');
    if (outcome === 'raced') return undefined;
    if (outcome.noticed) onEmailQueued();
    securityEvent(log, 'identity.linked', { userId: outcome.userId, ip: client.ip, provider: p.id, reason: 'verified_email' });
    return outcome.userId;
  };

  /**
   * Sign-in mode (docs/api.md#sign-in-mode): the identity's user, else a refusal for an
   * unverified email or an existing account (or a link to it when allowed), else a new user;
   * then the rules of every sign-in (SignInService.finishSignIn) with `amr` `["oauth"]`.
   */
  const signIn = async (p: OAuthProviderSettings, profile: ProviderProfile, flow: ConsumedFlow, client: ClientContext): Promise<CallbackOutcome> => {
    let userId: string | undefined;
    let identityId: string | undefined;
    for (let pass = 0; pass < MAX_SIGN_IN_PASSES && userId === undefined; pass++) {
      const known = await findIdentity(db, profile.issuer, profile.subject);
      if (known !== undefined) {
        userId = known.user_id;
        identityId = known.id;
        break;
      }
      if (profile.email === null) throw new CallbackRefusal('auth.oauth.email_not_verified');
      const owner = await findUserByEmail(db, profile.email);
      if (owner !== undefined) {
        if (!linkVerifiedEmail || !owner.is_email_verified) throw new CallbackRefusal('auth.oauth.account_exists');
        userId = await linkToEmailOwner(p, profile, owner, client);
      } else {
        userId = await createUser(p, { ...profile, email: profile.email });
        if (userId !== undefined) securityEvent(log, 'oauth.signed_up', { userId, ip: client.ip, provider: p.id });
      }
    }
    if (userId === undefined) throw new CallbackRefusal('auth.oauth.identity_taken');
    identityId ??= (await findIdentity(db, profile.issuer, profile.subject))?.id;
    for (let pass = 0; pass < MAX_SIGN_IN_PASSES; pass++) {
      const user = await findSignInUser(db, userId);
      if (user === undefined) throw new CallbackRefusal('auth.oauth.identity_taken');
      const result = await signInService.finishSignIn(user, { amr: OAUTH_AMR, client, method: 'identity_provider' });
      // undefined: a password was set between the read and the session; read the user again.
      if (result === undefined) continue;
      if (identityId !== undefined) await recordIdentitySignIn(db, identityId, { email: profile.email, now: clock.now() });
      if (result.kind === 'mfa_required') {
        return { location: withError(flow.redirectTo, 'auth.mfa_required'), mfaChallenge: { value: result.challenge, maxAgeSeconds: result.challengeMaxAgeSeconds } };
      }
      return { location: flow.redirectTo, session: result };
    }
    throw new AppError('service_unavailable');
  };

  /**
   * Link mode (docs/api.md#link-mode): links the identity to the flow's user while the session
   * that asked is still active, with a notice; no session is created.
   */
  const link = async (p: OAuthProviderSettings, profile: ProviderProfile, flow: ConsumedFlow & { mode: { kind: 'link' } }, client: ClientContext): Promise<CallbackOutcome> => {
    const { userId, sessionId } = flow.mode;
    const active = await findActiveSessionWithUser(db, sessionId, userId, clock.now());
    if (active === undefined) throw new CallbackRefusal('auth.oauth.link_expired');
    const outcome = await db.transaction(async (tx) => {
      const { identity, created } = await linkIdentity(tx, { id: randomUUID(), userId, provider: p.id, issuer: profile.issuer, subject: profile.subject, email: profile.email, now: clock.now() });
      if (!created) return { taken: identity.user_id !== userId, noticed: false };
      await recordEvent(tx, linkedEvent(identity), clock.now());
      return { taken: false, noticed: await identityNotice(tx, active.user, 'identity_linked', p, client), linked: true };
    });
    if (outcome.taken) throw new CallbackRefusal('auth.oauth.identity_taken');
    if (outcome.noticed) onEmailQueued();
    if ('linked' in outcome) securityEvent(log, 'identity.linked', { userId, sessionId, ip: client.ip, provider: p.id });
    return { location: flow.redirectTo };
  };

  return {
    async authorize(providerId, redirectTo, client) {
      return start(providerOf(providerId), redirectTo, { kind: 'sign_in' }, client);
    },

    async link(caller, providerId, redirectTo, client) {
      const p = providerOf(providerId);
      await sessions.requireRecentSignIn(caller);
      return start(p, redirectTo, { kind: 'link', userId: caller.user.id, sessionId: caller.session.id }, client);
    },

    async callback(providerId, c, client) {
      const p = providerOf(providerId);
      const flow =
        c.state === undefined || c.browserSecret === undefined || c.browserSecret === ''
          ? undefined
          : await consumeFlow(db, { provider: p.id, stateHash: sha256(c.state), browserHash: sha256(c.browserSecret), now: clock.now() });
      if (flow === undefined) {
        securityEvent(log, 'oauth.invalid_state', { ip: client.ip, provider: p.id, reason: c.browserSecret === undefined ? 'no_cookie' : 'no_flow' });
        throw new AppError('auth.oauth.invalid_state');
      }
      try {
        const profile = await providers.complete(p, { query: c.query, state: c.state!, codeVerifier: flow.codeVerifier, nonce: flow.nonce });
        return flow.mode.kind === 'link' ? await link(p, profile, flow as ConsumedFlow & { mode: { kind: 'link' } }, client) : await signIn(p, profile, flow, client);
      } catch (err) {
        const code =
          err instanceof ProviderFailure || err instanceof CallbackRefusal ? err.code : err instanceof AppError ? callbackCodeOf(err) : undefined;
        if (code === undefined) throw err;
        securityEvent(log, 'oauth.failed', { ip: client.ip, provider: p.id, reason: code, userId: flow.mode.kind === 'link' ? flow.mode.userId : undefined });
        if (err instanceof ProviderFailure) log.warn({ provider: p.id, failure: describeFailure(err.cause) }, 'identity provider exchange failed');
        return { location: withError(flow.redirectTo, code) };
      }
    },
  };
}
