import { randomUUID } from 'node:crypto';
import type { AuthenticationResponseJSON } from '@simplewebauthn/server';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../clock.js';
import type { PasswordHasher } from '../../crypto/password.js';
import { newRandomSecret, sha256 } from '../../crypto/secrets.js';
import type { Db } from '../../db/db.js';
import { AppError } from '../../errors.js';
import type { AuthMetrics, SignInOutcome } from '../../metrics.js';
import type { ClientContext } from '../../plugins/client-context.js';
import { securityEvent } from '../audit/security-events.js';
import type { MfaService, SecondFactor } from '../mfa/mfa.service.js';
import { PASSKEY_AMR, type PasskeysService } from '../passkeys/passkeys.service.js';
import type { RequestOptions } from '../passkeys/passkeys.schemas.js';
import { clientNetwork, UNKNOWN_CLIENT } from '../rate-limits/client-network.js';
import type { RateLimitRules } from '../rate-limits/rate-limits.rules.js';
import { tooManyAttempts, type AccountWindow, type RateLimiter, type RateLimitVerdict } from '../rate-limits/rate-limits.service.js';
import type { IssuedTokens, SessionsService } from '../sessions/sessions.service.js';
import { normalizeEmail, normalizePhone, normalizeUsername } from '../users/identifiers.js';
import { banInForce, findSignInUser, findUserBan, upgradePasswordHash, type SignInUser, type UserRow } from '../users/users.shared.js';
import {
  consumeChallenge,
  countSignInAndFindPasskey,
  countSignInAndFindUsers,
  insertChallenge,
  lockChallenge,
  recordChallengeFailure,
  type ChallengeRow,
} from './sign-in.repo.js';

/**
 * The `amr` (RFC 8176) of a session signed in with a password: the `sessions.amr` column's
 * default (migration 007), which its access tokens carry across refreshes.
 */
export const PASSWORD_AMR: readonly string[] = Object.freeze(['pwd']);
/** What the second step adds to the first step's `amr` (RFC 8176): a one-time code (TOTP or recovery code). */
export const OTP_AMR = 'otp';
/** How long a sign-in challenge of a user with a second factor lives, in seconds (docs/api.md#sign-in-second-step). */
export const MFA_CHALLENGE_TTL_SECONDS = 300;
/** Wrong codes after which a sign-in challenge is dead (docs/api.md#sign-in-second-step). */
export const MAX_CHALLENGE_ATTEMPTS = 5;

/** Stored username form (docs/api.md#operations User): a username outside it names nobody. */
const STORED_USERNAME = /^[a-z0-9_]{3,32}$/;

/**
 * Whether `amr` already proves two factors, so a user with a second factor needs no second step:
 * the second step itself (`otp` beside the first step's method), or a passkey whose
 * authenticator verified the user (`hwk` with `user`, a multi-factor cryptographic
 * authenticator, NIST SP 800-63B-4 §3.1.7; docs/api.md#access-token).
 */
export function provesTwoFactors(amr: readonly string[]): boolean {
  return (amr.includes(OTP_AMR) && amr.length >= 2) || (amr.includes('hwk') && amr.includes('user'));
}

/** The way a sign-in began; decides which per-method metrics its outcome also counts. */
export type SignInMethod = 'password' | 'second_step' | 'passkey' | 'identity_provider';

/**
 * The outcome of a sign-in whose credentials checked out: a session, or, for a user with a
 * second factor, a challenge (the `mfa_challenge` cookie's value) to complete with
 * `POST /sign-in/mfa` (docs/api.md#sign-in-second-step).
 */
export type SignInResult =
  | (IssuedTokens & { readonly kind: 'session'; readonly user: UserRow })
  | { readonly kind: 'mfa_required'; readonly user: UserRow; readonly challenge: string; readonly challengeMaxAgeSeconds: number };

/** Dependencies of {@link createSignInService}. */
export interface SignInDeps {
  readonly db: Db;
  readonly clock: Clock;
  readonly hasher: PasswordHasher;
  readonly limiter: RateLimiter;
  readonly rules: Pick<
    RateLimitRules,
    'signInPerIdentifier' | 'signInPerIp' | 'signInPerAccount' | 'signInPerUnknownAccount' | 'mfaSignInPerIp' | 'mfaSignInPerAccount' | 'passkeyOptionsPerIp'
  >;
  readonly sessions: Pick<SessionsService, 'createSession'>;
  readonly mfa: Pick<MfaService, 'verifySignInCode' | 'reportWrongCode'>;
  readonly passkeys: Pick<PasskeysService, 'authenticationOptions' | 'verifyAuthentication' | 'recordAuthentication'>;
  readonly log: FastifyBaseLogger;
  readonly metrics: Pick<AuthMetrics, 'signIn' | 'mfaSignIn' | 'passkeySignIn'>;
}

/**
 * Sign-in (docs/api.md#sign-in): one step per way in, each checking its own credential, and all
 * ending in {@link SignInService.finishSignIn}, which decides in one place what the account
 * requires. Adding a way in means one step here and one route in sign-in.routes.ts.
 * OWASP ASVS 5.0 V6 (authentication); NIST SP 800-63B-4.
 */
export interface SignInService {
  /**
   * The password step: every given identifier must name the same user (docs/api.md#sign-in);
   * unknown users cost the same argon2id verification as known ones. The attempt's rate-limit
   * counts and the user lookup are one statement; failed attempts count per client, per
   * identifier from that client and per account (docs/security.md §6). A hash with weaker
   * argon2id parameters than configured is re-hashed in the background once the session or
   * challenge is stored.
   * @returns the session, or the second step's challenge for a user with a second factor.
   * @throws AppError `auth.invalid_credentials` (401), `auth.sign_in.too_many_attempts` (429,
   *   Retry-After), and after a right password {@link finishSignIn}'s refusals.
   */
  password(input: { username?: string; email?: string; phone?: string; password: string }, client: ClientContext): Promise<SignInResult>;
  /**
   * The second step (docs/api.md#sign-in-second-step): the challenge of the `mfa_challenge`
   * cookie (locked; dead after {@link MAX_CHALLENGE_ATTEMPTS} wrong codes or
   * {@link MFA_CHALLENGE_TTL_SECONDS} s) and a TOTP code or an unused recovery code
   * (MfaService.verifySignInCode). Wrong codes count per challenge, per account and per client
   * network, and may warn the owner (MfaService.reportWrongCode). On success the challenge is
   * used and {@link finishSignIn} runs with the first step's `amr` and `otp`, while the password
   * is still the one the first step checked.
   * @throws AppError `auth.mfa.missing_challenge`, `auth.mfa.challenge_expired`,
   *   `auth.mfa.invalid_code` (401), `auth.mfa.too_many_attempts` (429, Retry-After), and
   *   {@link finishSignIn}'s refusals.
   */
  secondStep(challenge: string | undefined, factor: SecondFactor, client: ClientContext): Promise<IssuedTokens & { user: UserRow }>;
  /**
   * The options of a passkey sign-in (PasskeysService.authenticationOptions), counted against the
   * client's options limit first (each call stores a challenge).
   * @throws AppError `auth.sign_in.too_many_attempts` (429, Retry-After).
   */
  passkeyOptions(client: Pick<ClientContext, 'ip'>): Promise<{ options: RequestOptions; cookie: string; maxAgeSeconds: number }>;
  /**
   * The passkey step (docs/api.md#sign-in-with-a-passkey): one statement counts the try against
   * the client's sign-in limit and finds the credential with its owner and the account's failed
   * sign-ins; the assertion is checked (PasskeysService.verifyAuthentication); then
   * {@link finishSignIn} with `amr` `["hwk","user"]`, the account's window (an account locked
   * by failed sign-ins is locked for passkeys too) and the signature counter as its last check
   * (PasskeysService.recordAuthentication).
   * @throws AppError `auth.passkeys.missing_challenge`, `auth.passkeys.invalid_response` (401),
   *   `auth.sign_in.too_many_attempts` (429, Retry-After), and {@link finishSignIn}'s refusals.
   */
  passkey(cookie: string | undefined, response: AuthenticationResponseJSON, client: ClientContext): Promise<IssuedTokens & { user: UserRow }>;
  /**
   * The end of every sign-in whose credential checked out, so no way in can go around what the
   * account requires, in this order: a ban in force refuses; an email that is not verified
   * refuses; an account over its failed sign-ins refuses (when the step read its window,
   * `accountWindow`: the password step checks it earlier, before any hash); the step's own
   * last check runs (`confirm`: a passkey's signature counter); a user with a second factor gets
   * a challenge ({@link MFA_CHALLENGE_TTL_SECONDS} s, {@link MAX_CHALLENGE_ATTEMPTS} tries,
   * remembering `amr`) unless `amr` already proves two factors ({@link provesTwoFactors});
   * otherwise a session with `amr` (SessionsService.createSession), created only while the
   * user's `password_version` is still `checkedPasswordVersion` (by default the one read with
   * `user`). `forgiveKeys`: rate-limit counts taken back on a ban, an unverified email, a
   * challenge or a session (a right credential does not count as a failure), not on a lock.
   * Logs `sign_in.*` security events and counts the outcome (per `method` too).
   * @returns the session or the challenge; undefined when the password changed since it was checked.
   * @throws AppError `auth.user_banned` (403), `auth.email_not_verified` (403),
   *   `auth.sign_in.too_many_attempts` (429, Retry-After), and what `confirm` throws.
   */
  finishSignIn(
    user: SignInUser,
    c: {
      amr: readonly string[];
      client: ClientContext;
      method: SignInMethod;
      forgiveKeys?: readonly string[];
      checkedPasswordVersion?: number;
      accountWindow?: AccountWindow;
      confirm?: () => Promise<void>;
    },
  ): Promise<SignInResult | undefined>;
}

/** The subject under which the failures of identifiers that name no account are counted: the normalised identifiers given, together. */
function unknownAccountSubject(subjects: readonly string[]): string {
  return subjects.join('\n');
}

/** Builds the {@link SignInService}. */
export function createSignInService(deps: SignInDeps): SignInService {
  const { db, clock, hasher, limiter, rules, sessions, mfa, passkeys, log, metrics } = deps;
  // The statement that finds the users reads the failures of unknown identifiers in the window of the account rule.
  if (rules.signInPerUnknownAccount.windowSeconds !== rules.signInPerAccount.windowSeconds) {
    throw new Error('signInPerUnknownAccount must have the window of signInPerAccount');
  }

  /** Counts a sign-in's outcome, and for a passkey the passkey metric too (docs/operations.md, metrics). */
  const countOutcome = (method: SignInMethod, outcome: SignInOutcome): void => {
    metrics.signIn(outcome);
    if (method === 'passkey' && (outcome === 'success' || outcome === 'unverified' || outcome === 'locked')) metrics.passkeySignIn(outcome);
  };

  /**
   * The 429 of a locked sign-in, logged and counted. `account`: the account's own limit refused
   * it (with the user, when the identifiers name one).
   */
  const locked = (method: SignInMethod, retryAfterSeconds: number, ip: string | null, account?: { userId: string | undefined }): AppError => {
    securityEvent(log, 'sign_in.locked', { ip, ...(account === undefined ? {} : { userId: account.userId, reason: 'account' }) });
    countOutcome(method, 'locked');
    return tooManyAttempts('auth.sign_in.too_many_attempts', retryAfterSeconds);
  };

  /**
   * Counts a password sign-in's attempt against the client and then every given identifier from
   * that client (docs/security.md, rate limits), and finds the users the identifiers name with
   * their account's failures of the current hour, in one statement (docs/performance.md). The
   * client first: a source already over its limit does not also count against the identifiers
   * it names. Known and unknown identifiers count alike, so a lock reveals nothing; a right
   * password takes its counts back ({@link finishSignIn}), so only failures add up. Counted per
   * client, an identifier's failures from elsewhere never lock its owner out; the account's own
   * limit (`signInPerAccount`, failures counted by {@link countAccountFailure}) bounds what many
   * clients together can try.
   * @returns `user`: the one user every given identifier names, or undefined (docs/decisions.md,
   *   "Identifiers and passwords"); `rateLimitKeys`: the counted keys, to take them back.
   * @throws AppError `auth.sign_in.too_many_attempts` (429) with Retry-After, before any
   *   password is hashed.
   */
  const countAttemptAndFindUser = async (
    subjects: readonly string[],
    ip: string | null,
    ids: { username?: string | undefined; email?: string | undefined; phone?: string | undefined },
  ): Promise<{ user: SignInUser | undefined; rateLimitKeys: readonly string[] }> => {
    const plan = limiter.plan({
      first: ip === null ? undefined : { rule: rules.signInPerIp, subject: ip },
      rule: rules.signInPerIdentifier,
      subjects: subjects.map((subject) => `${subject} from ${clientNetwork(ip)}`),
    });
    // A username outside the stored form names nobody: the statement need not look (the caller keeps the dummy-hash timing).
    const impossible = ids.username !== undefined && !STORED_USERNAME.test(ids.username);
    // An identifier that names no account is counted per normalised identifier, under a key of
    // its own whose window the same statement reads: it meets the per-account limit exactly as
    // an account does, so a 429 tells nothing about who exists.
    const { windows, rows: found } = await countSignInAndFindUsers(db, {
      plan,
      account: limiter.accountWindow(rules.signInPerAccount),
      unknownAccountKey: limiter.keyOf({ rule: rules.signInPerUnknownAccount, subject: unknownAccountSubject(subjects) }),
      ids: impossible ? {} : ids,
    });
    const { verdict, keys } = limiter.judge(plan, windows);
    const rows = found.filter((row): row is typeof row & SignInUser => row.id != null);
    const [only] = rows;
    const matches =
      rows.length === 1 &&
      only !== undefined &&
      (ids.username === undefined || only.username === ids.username) &&
      (ids.email === undefined || only.email === ids.email) &&
      (ids.phone === undefined || only.phone === ids.phone);
    const fallback = found[0];
    const accountVerdict: RateLimitVerdict = matches
      ? limiter.accountVerdict(rules.signInPerAccount, only)
      : limiter.accountVerdict(rules.signInPerUnknownAccount, { window_hits: fallback?.fallback_hits ?? null, window_start: fallback?.fallback_window_start ?? null });
    const refused = [verdict, accountVerdict].flatMap((v) => (v.allowed ? [] : [v.retryAfterSeconds]));
    if (refused.length > 0) throw locked('password', Math.max(...refused), ip, accountVerdict.allowed ? undefined : { userId: matches ? only.id : undefined });
    if (!matches) return { user: undefined, rateLimitKeys: keys };
    const { window_hits: _hits, window_start: _start, fallback_hits: _fh, fallback_window_start: _fs, ...user } = only;
    return { user, rateLimitKeys: keys };
  };

  /**
   * Counts one failed sign-in against the account (NIST SP 800-63B-4 §3.2.2: at most 100
   * failures per account; here per hour, so no one can lock an account for good). Counted after
   * the password was found wrong, so requests in flight together can pass the limit by their
   * number. Identifiers that name no account are counted the same way, per normalised
   * identifier (`signInPerUnknownAccount`, read by {@link countAttemptAndFindUser}): the same
   * write and the same limit, so neither the timing nor the 429 tells who exists (ASVS 5.0
   * V6.3.8).
   */
  const countAccountFailure = (user: UserRow | undefined, subjects: readonly string[]): Promise<unknown> =>
    user === undefined ? limiter.hit(rules.signInPerUnknownAccount, unknownAccountSubject(subjects)) : limiter.hit(rules.signInPerAccount, user.id);

  /**
   * Re-hashes a password whose stored argon2id parameters are below the configured ones (OWASP
   * Password Storage Cheat Sheet: upgrade at the next login), in the background: the answer does
   * not wait for the second hash. A parallel change wins; the password's version stays.
   */
  const upgradeHashInBackground = (userId: string, expectedHash: string, password: string): void => {
    void (async () => {
      const newHash = await hasher.hash(password);
      if (await upgradePasswordHash(db, userId, { expectedHash, newHash }, clock.now())) {
        log.info({ userId }, 'password hash upgraded to the configured argon2id parameters');
      }
    })().catch((err: unknown) => log.warn({ err, userId }, 'password hash upgrade failed'));
  };

  /** Takes back rate-limit counts, when there are any. */
  const forgive = async (keys: readonly string[]): Promise<void> => {
    if (keys.length > 0) await limiter.forgiveKeys(keys);
  };

  /** The refusal of a banned user whose credential checked out, logged and counted (docs/api.md, admin API: "Bans"). */
  const refuseBanned = (method: SignInMethod, userId: string, ip: string | null): AppError => {
    securityEvent(log, 'sign_in.failed', { userId, ip, reason: 'banned' });
    countOutcome(method, 'banned');
    return new AppError('auth.user_banned');
  };

  /** {@link SignInService.finishSignIn}. */
  const finishSignIn: SignInService['finishSignIn'] = async (user, c) => {
    const { amr, client, method } = c;
    const forgiveKeys = c.forgiveKeys ?? [];
    if (banInForce(user, clock.now())) {
      // The credential was right: its attempt does not count; the ban is said only now (docs/api.md, admin API: "Bans").
      await forgive(forgiveKeys);
      throw refuseBanned(method, user.id, client.ip);
    }
    if (user.email !== null && !user.is_email_verified) {
      // The credential was right: its attempt does not count (docs/security.md §6).
      await forgive(forgiveKeys);
      securityEvent(log, 'sign_in.failed', { userId: user.id, ip: client.ip, reason: 'email_not_verified' });
      countOutcome(method, 'unverified');
      throw new AppError('auth.email_not_verified');
    }
    if (c.accountWindow !== undefined) {
      // An account locked by failed sign-ins is locked for every way in.
      const accountVerdict = limiter.accountVerdict(rules.signInPerAccount, c.accountWindow);
      if (!accountVerdict.allowed) throw locked(method, accountVerdict.retryAfterSeconds, client.ip, { userId: user.id });
    }
    await c.confirm?.();
    const checkedPasswordVersion = c.checkedPasswordVersion ?? user.password_version;
    if (user.mfa_enabled && !provesTwoFactors(amr)) {
      // No session until the second step, which adds `otp` to this step's `amr`.
      await forgive(forgiveKeys);
      const challenge = newRandomSecret();
      const now = clock.now();
      await insertChallenge(db, {
        id: randomUUID(),
        tokenHash: sha256(challenge),
        userId: user.id,
        passwordVersion: checkedPasswordVersion,
        passwordHash: user.password_hash,
        amr,
        now,
        expiresAt: new Date(now.getTime() + MFA_CHALLENGE_TTL_SECONDS * 1000),
      });
      securityEvent(log, 'sign_in.mfa_required', { userId: user.id, ip: client.ip });
      countOutcome(method, 'mfa_required');
      return { kind: 'mfa_required', user, challenge, challengeMaxAgeSeconds: MFA_CHALLENGE_TTL_SECONDS };
    }
    const issued = await sessions.createSession(user.id, { checkedPasswordVersion, amr, client, forgiveKeys });
    if (issued === undefined) {
      // Banned meanwhile (the statement refuses a banned user), or the password changed since it
      // was checked: one read tells which, only on this rare path.
      const current = await findUserBan(db, user.id);
      if (current !== undefined && banInForce(current, clock.now())) throw refuseBanned(method, user.id, client.ip);
      return undefined;
    }
    securityEvent(log, 'sign_in.succeeded', { userId: user.id, sessionId: issued.sessionId, ip: client.ip });
    countOutcome(method, 'success');
    return { kind: 'session', user, ...issued };
  };

  /** A second step's challenge that is missing, used, dead or expired: counted, and the 401 to answer. */
  const challengeExpired = (): AppError => {
    metrics.mfaSignIn('challenge_expired');
    return new AppError('auth.mfa.challenge_expired');
  };
  const isLiveChallenge = (row: ChallengeRow | undefined, now: Date): row is ChallengeRow =>
    row !== undefined && row.consumed_at === null && row.expires_at > now && row.attempts < MAX_CHALLENGE_ATTEMPTS;

  return {
    finishSignIn,

    async password(input, client) {
      const username = input.username === undefined ? undefined : normalizeUsername(input.username);
      const email = input.email === undefined ? undefined : normalizeEmail(input.email);
      // A phone that cannot be normalised matches nobody; it is still a credentials failure.
      const phone = input.phone === undefined ? undefined : (normalizePhone(input.phone) ?? input.phone);
      const subjects = [
        ...(username === undefined ? [] : [`username:${username}`]),
        ...(email === undefined ? [] : [`email:${email}`]),
        ...(phone === undefined ? [] : [`phone:${phone}`]),
      ];
      const { user, rateLimitKeys } = await countAttemptAndFindUser(subjects, client.ip, { username, email, phone });
      const password = input.password.normalize('NFKC');
      // Unknown users cost one argon2id verification too, so timing does not reveal who exists.
      // A user created without a password (docs/api.md, admin API) has none to match: the same cost and answer as a wrong one.
      const storedHash = user?.password_hash ?? null;
      const passwordOk = storedHash === null ? (await hasher.verifyDummy(password), false) : await hasher.verify(storedHash, password);
      if (user === undefined || storedHash === null || !passwordOk) {
        await countAccountFailure(user, subjects);
        const reason = user === undefined ? 'unknown_identifier' : storedHash === null ? 'no_password' : 'wrong_password';
        securityEvent(log, 'sign_in.failed', { userId: user?.id, ip: client.ip, reason });
        countOutcome('password', 'bad_credentials');
        throw new AppError('auth.invalid_credentials');
      }
      const result = await finishSignIn(user, { amr: PASSWORD_AMR, client, method: 'password', forgiveKeys: rateLimitKeys });
      if (result === undefined) {
        // The password was changed or reset since it was checked (a re-hash of the same password
        // keeps its version): the one typed is no longer the account's.
        countOutcome('password', 'bad_credentials');
        throw new AppError('auth.invalid_credentials');
      }
      // Once the session or challenge is stored (a challenge checks the password's version, which a re-hash leaves as it is).
      if (hasher.needsRehash(storedHash)) upgradeHashInBackground(user.id, storedHash, password);
      return result;
    },

    async secondStep(challenge, factor, client) {
      if (challenge === undefined || challenge === '') {
        metrics.mfaSignIn('challenge_expired');
        throw new AppError('auth.mfa.missing_challenge');
      }
      const ip = client.ip ?? UNKNOWN_CLIENT;
      const tokenHash = sha256(challenge);
      const seen = await lockChallenge(db, tokenHash);
      if (!isLiveChallenge(seen, clock.now())) throw challengeExpired();
      // Every try counts per client network and per account before the code is checked; a success takes both back.
      const { verdict, batchHits } = await limiter.hitAll({ first: { rule: rules.mfaSignInPerIp, subject: ip }, rule: rules.mfaSignInPerAccount, subjects: [seen.user_id] });
      if (!verdict.allowed) {
        metrics.mfaSignIn('locked');
        securityEvent(log, 'mfa.rate_limited', { userId: seen.user_id, ip: client.ip });
        throw tooManyAttempts('auth.mfa.too_many_attempts', verdict.retryAfterSeconds);
      }
      const now = clock.now();
      const outcome = await db.transaction(async (tx): Promise<'expired' | 'invalid_code' | { passwordVersion: number; amr: string[]; used: 'totp' | 'recovery_code' }> => {
        const row = await lockChallenge(tx, tokenHash);
        if (!isLiveChallenge(row, now)) return 'expired';
        const used = await mfa.verifySignInCode(tx, row.user_id, factor);
        if (used === undefined) {
          // The counted try commits with this transaction.
          await recordChallengeFailure(tx, row.id);
          return 'invalid_code';
        }
        await consumeChallenge(tx, row.id, now);
        return { passwordVersion: row.password_version, amr: row.amr, used };
      });
      if (outcome === 'expired') throw challengeExpired();
      if (outcome === 'invalid_code') {
        metrics.mfaSignIn('invalid_code');
        securityEvent(log, 'mfa.failed', { userId: seen.user_id, ip: client.ip, reason: 'invalid_code' });
        await mfa.reportWrongCode(seen.user_id, batchHits[0], client);
        throw new AppError('auth.mfa.invalid_code');
      }
      await limiter.forgive(rules.mfaSignInPerIp, ip);
      await limiter.forgive(rules.mfaSignInPerAccount, seen.user_id);
      const user = await findSignInUser(db, seen.user_id);
      // The session is created only while the password the first step checked is still the user's.
      const result =
        user === undefined
          ? undefined
          : await finishSignIn(user, { amr: [...outcome.amr, OTP_AMR], client, method: 'second_step', checkedPasswordVersion: outcome.passwordVersion });
      if (result?.kind !== 'session') throw challengeExpired();
      metrics.mfaSignIn(outcome.used);
      return result;
    },

    async passkeyOptions(client) {
      await limiter.enforce(rules.passkeyOptionsPerIp, client.ip ?? UNKNOWN_CLIENT, 'auth.sign_in.too_many_attempts', () => metrics.passkeySignIn('locked'));
      return passkeys.authenticationOptions();
    },

    async passkey(cookie, response, client) {
      if (cookie === undefined || cookie === '') {
        metrics.passkeySignIn('missing_challenge');
        throw new AppError('auth.passkeys.missing_challenge');
      }
      // One statement counts the try against the client's sign-in limit, as a password sign-in
      // does, and finds the credential with its owner and the account's failed sign-ins; the
      // session's statement takes the count back on success (docs/performance.md).
      const plan = limiter.plan({ first: { rule: rules.signInPerIp, subject: client.ip ?? UNKNOWN_CLIENT }, rule: rules.signInPerIp, subjects: [] });
      const { windows, owner } = await countSignInAndFindPasskey(db, { plan, account: limiter.accountWindow(rules.signInPerAccount), credentialId: response.id });
      const { verdict, keys } = limiter.judge(plan, windows);
      if (!verdict.allowed) throw locked('passkey', verdict.retryAfterSeconds, client.ip);
      const assertion = await passkeys.verifyAuthentication(cookie, response, owner, client);
      const found = owner!; // verifyAuthentication refuses an unknown credential
      const {
        window_hits: _hits,
        window_start: _start,
        webauthn_user_handle: _handle,
        passkey_id: _pid,
        credential_id: _cid,
        public_key: _pk,
        counter: _c,
        transports: _t,
        ...user
      } = found;
      // Created only while the password is the one read with the passkey: a session started
      // during a password reset (which ends every session) cannot outlive it. A re-hash of the
      // same password by a parallel sign-in does not stop it (`password_version`).
      const result = await finishSignIn(user, {
        amr: PASSKEY_AMR,
        client,
        method: 'passkey',
        forgiveKeys: keys,
        accountWindow: { window_hits: found.window_hits, window_start: found.window_start },
        // The counter must go up (a cloned authenticator, or one assertion used twice, is refused).
        confirm: () => passkeys.recordAuthentication(found, assertion, client),
      });
      if (result?.kind !== 'session') {
        metrics.passkeySignIn('invalid_response');
        securityEvent(log, 'passkey.sign_in_failed', { userId: user.id, ip: client.ip, reason: 'account_changed' });
        throw new AppError('auth.passkeys.invalid_response');
      }
      return result;
    },
  };
}
