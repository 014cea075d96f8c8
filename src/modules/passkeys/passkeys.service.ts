import { randomBytes, randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import {
  generateAuthenticationOptions,
  generateRegistrationOptions,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
  type AuthenticationResponseJSON,
  type RegistrationResponseJSON,
} from '@simplewebauthn/server';
import type { Clock } from '../../clock.js';
import type { WebauthnSettings } from '../../config.js';
import type { Db } from '../../db/db.js';
import { newRandomSecret, sha256 } from '../../crypto/secrets.js';
import { AppError } from '../../errors.js';
import { clientDataOf, originRefusal } from './passkey-origin.js';
import type { AuthMetrics } from '../../metrics.js';
import { securityEvent } from '../audit/security-events.js';
import { queueUserNotice } from '../mail/notices.js';
import { MAX_CREDENTIAL_ID_BYTES } from './passkeys.schemas.js';
import type { RateLimitRules } from '../rate-limits/rate-limits.rules.js';
import type { RateLimiter } from '../rate-limits/rate-limits.service.js';
import type { ClientContext } from '../../plugins/client-context.js';
import { UUID_PATTERN } from '../tokens/access-token.service.js';
import { lockUser, type UserRow } from '../users/users.shared.js';
import {
  countPasskeys,
  deletePasskey,
  findPasskey,
  insertPasskey,
  insertRegistrationChallenge,
  insertWebauthnChallenge,
  listPasskeys,
  recordPasskeyUse,
  renamePasskey,
  takeAuthenticationChallenge,
  takeRegistrationChallenge,
  userHandleOf,
  type PasskeyRow,
  type PasskeyWithOwner,
} from './passkeys.repo.js';
export type { PasskeyWithOwner } from './passkeys.repo.js';
import { passkeyNoticeLine } from './passkey-notices.js';
import { recordEvent } from '../events/events.shared.js';
import type { CreationOptions, RequestOptions } from './passkeys.schemas.js';

/**
 * Live registration challenges one user may have (docs/api.md#passkeys): a new one replaces the
 * oldest. Enough for a registration page open in a few tabs; each further ask costs no row.
 */
export const MAX_REGISTRATION_CHALLENGES_PER_USER = 3;
/** Most passkeys one account may have (docs/api.md#passkeys). */
export const MAX_PASSKEYS_PER_USER = 10;
/** How long a registration or sign-in challenge lives, in seconds (docs/api.md#passkeys). */
export const WEBAUTHN_CHALLENGE_TTL_SECONDS = 300;
/**
 * The `amr` (RFC 8176) of a session signed in with a passkey: a hardware-secured key (`hwk`)
 * unlocked by user verification (`user`), two factors in one (NIST SP 800-63B-4 §3.1.7).
 */
export const PASSKEY_AMR: readonly string[] = Object.freeze(['hwk', 'user']);
/** Length of the WebAuthn user handle, in bytes (W3C WebAuthn Level 3 §14.6.1 recommends 64 random bytes at most). */
const USER_HANDLE_BYTES = 32;
/** Transports a credential may list (W3C WebAuthn Level 3 §5.8.4); others are dropped, not stored. */
const KNOWN_TRANSPORTS: ReadonlySet<string> = new Set(['ble', 'cable', 'hybrid', 'internal', 'nfc', 'smart-card', 'usb']);
/** Public-key algorithms accepted: EdDSA, ES256, RS256 (COSE identifiers, RFC 9053), the set browsers and authenticators use. */
const SUPPORTED_ALGORITHM_IDS = [-8, -7, -257];

/** Dependencies of {@link createPasskeysService}. */
export interface PasskeysDeps {
  readonly db: Db;
  readonly clock: Clock;
  /** WEBAUTHN_RP_ID, WEBAUTHN_RP_NAME, WEBAUTHN_ORIGINS. */
  readonly rp: WebauthnSettings;
  readonly limiter: RateLimiter;
  readonly rules: Pick<RateLimitRules, 'passkeyRegistrationPerUser'>;
  readonly log: FastifyBaseLogger;
  readonly metrics: Pick<AuthMetrics, 'passkeySignIn' | 'passkeyChange'>;
  readonly onEmailQueued: () => void;
}

/**
 * Passkeys (docs/api.md#passkeys): WebAuthn Level 3 registration for a signed-in user, listing,
 * renaming and deletion, and the checks of a sign-in with a discoverable credential and user
 * verification that the sign-in module (sign-in.service.ts) runs.
 * OWASP ASVS 5.0 V6.5 (multi-factor), V6.7 (cryptographic authenticators); NIST SP 800-63B-4 §3.1.7.
 */
export interface PasskeysService {
  /**
   * The options of `navigator.credentials.create()` for `user`: a new challenge (stored, single
   * use, 300 s; the user keeps at most {@link MAX_REGISTRATION_CHALLENGES_PER_USER}, the oldest
   * replaced), the account's user handle, its passkeys excluded, resident key and user
   * verification required, no attestation. Every call counts against the user's limit
   * (`passkeyRegistrationPerUser`), as each stores a challenge.
   * @throws AppError `auth.passkeys.limit_reached` (409), `auth.passkeys.too_many_attempts` (429, Retry-After).
   */
  registrationOptions(user: UserRow): Promise<CreationOptions>;
  /**
   * Verifies a registration response against the user's challenge (used up whatever the
   * outcome), the configured origins and RP ID, with user verification, and stores the
   * credential with a `passkey_added` notice and the `passkey.added` event
   * (docs/api.md#event-types), in one transaction under the user's row lock.
   * @returns the stored passkey.
   * @throws AppError `auth.passkeys.validation_failed` (400: no live challenge, does not verify,
   *   already registered), `auth.passkeys.limit_reached` (409).
   */
  register(user: UserRow, input: { response: RegistrationResponseJSON; name?: string | null | undefined }, client: ClientContext): Promise<PasskeyRow>;
  /** The user's passkeys, oldest first. */
  list(user: UserRow): Promise<PasskeyRow[]>;
  /**
   * Renames one of the user's passkeys (`null` or blank: no name).
   * @throws AppError `auth.passkeys.not_found` (404, also for a malformed id), `auth.passkeys.forbidden` (403).
   */
  rename(user: UserRow, passkeyId: string, name: string | null): Promise<PasskeyRow>;
  /**
   * Deletes one of the user's passkeys, queues a `passkey_removed` notice and records the
   * `passkey.removed` event, in one transaction.
   * @throws AppError `auth.passkeys.not_found` (404, also for a malformed id), `auth.passkeys.forbidden` (403).
   */
  remove(user: UserRow, passkeyId: string, client: ClientContext): Promise<void>;
  /**
   * The options of `navigator.credentials.get()` for a discoverable credential (no
   * `allowCredentials`), user verification required, and the value of the `webauthn_challenge`
   * cookie that binds the stored challenge (its SHA-256 is stored) to this browser. The sign-in
   * module counts the call against the client's options limit first (each stores a challenge).
   */
  authenticationOptions(): Promise<{ options: RequestOptions; cookie: string; maxAgeSeconds: number }>;
  /**
   * The check of a passkey sign-in's assertion (W3C WebAuthn Level 3 §7.2), for the sign-in
   * module: takes the challenge of the `webauthn_challenge` cookie (used up by any try), then
   * requires the credential `owner` (found by the sign-in's statement; undefined when unknown),
   * its user handle, an allowed origin, and a signature with user verification.
   * @returns the authenticator's new signature counter and backup state, for {@link recordAuthentication}.
   * @throws AppError `auth.passkeys.invalid_response` (401), logged as `passkey.sign_in_failed`.
   */
  verifyAuthentication(cookie: string, response: AuthenticationResponseJSON, owner: PasskeyWithOwner | undefined, client: ClientContext): Promise<PasskeyAssertion>;
  /**
   * Records a verified assertion on its passkey: the counter must go up (or stay 0 for an
   * authenticator that keeps none), atomically, so a cloned authenticator or an assertion used
   * twice is refused.
   * @throws AppError `auth.passkeys.invalid_response` (401).
   */
  recordAuthentication(owner: PasskeyWithOwner, assertion: PasskeyAssertion, client: ClientContext): Promise<void>;
}

/** What a verified assertion tells of its authenticator ({@link PasskeysService.verifyAuthentication}). */
export interface PasskeyAssertion {
  readonly newCounter: number;
  readonly backedUp: boolean;
}

/** A blank name is no name. */
const nameOrNull = (name: string | null | undefined): string | null => (name === undefined || name === null || name.trim() === '' ? null : name.trim());


/** Builds the {@link PasskeysService}. */
export function createPasskeysService(deps: PasskeysDeps): PasskeysService {
  const { db, clock, rp, limiter, rules, log, metrics, onEmailQueued } = deps;
  const expiresAt = (now: Date): Date => new Date(now.getTime() + WEBAUTHN_CHALLENGE_TTL_SECONDS * 1000);

  /** The user's passkey `passkeyId`, or the 404/403 the caller answers. */
  const ownPasskey = async (user: UserRow, passkeyId: string): Promise<PasskeyRow> => {
    const row = UUID_PATTERN.test(passkeyId) ? await findPasskey(db, passkeyId) : undefined;
    if (row === undefined) throw new AppError('auth.passkeys.not_found');
    if (row.user_id !== user.id) throw new AppError('auth.passkeys.forbidden');
    return row;
  };

  const invalidRegistration = (message: string): AppError => new AppError('auth.passkeys.validation_failed', { message });

  /** A refused passkey sign-in: counted, logged, and the 401 the caller answers (with `message` instead of the catalog's). */
  const refused = (reason: string, client: ClientContext, userId?: string, message?: string): AppError => {
    metrics.passkeySignIn('invalid_response');
    securityEvent(log, 'passkey.sign_in_failed', { userId, ip: client.ip, reason });
    return new AppError('auth.passkeys.invalid_response', message === undefined ? {} : { message });
  };

  /** The assertion checked against the stored credential; the new counter and backup state, or undefined. */
  const verifyAssertion = async (response: AuthenticationResponseJSON, challenge: string, owner: PasskeyWithOwner) => {
    try {
      const result = await verifyAuthenticationResponse({
        response,
        expectedChallenge: challenge,
        expectedOrigin: [...rp.origins],
        expectedRPID: rp.rpId,
        credential: { id: owner.credential_id, publicKey: new Uint8Array(owner.public_key), counter: owner.counter, transports: owner.transports },
        requireUserVerification: true,
      });
      return result.verified && result.authenticationInfo.userVerified ? result.authenticationInfo : undefined;
    } catch {
      // A malformed or forged response, a wrong origin, RP ID or challenge, a counter not above the stored one.
      return undefined;
    }
  };

  /**
   * A registration response checked by the library (challenge, origins, RP ID, user present and
   * verified, algorithm) and then by the rules the library leaves to the relying party: the
   * credential id is 1 to 1023 bytes and the one the response names (W3C WebAuthn Level 3 §7.1
   * step 24), and the credential is discoverable when the client says (`credProps`).
   * @throws AppError `auth.passkeys.validation_failed` (400), with a fixed message; the library's
   *   reason goes to the log.
   */
  const verifyRegistration = async (response: RegistrationResponseJSON, challenge: string, user: UserRow) => {
    // An origin not configured is the usual setup mistake: the answer names it (docs/api.md#passkeys).
    const wrongOrigin = originRefusal(response.response.clientDataJSON, rp.origins);
    if (wrongOrigin !== undefined) throw invalidRegistration(`the registration response does not verify: ${wrongOrigin}`);
    let info;
    try {
      const result = await verifyRegistrationResponse({
        response,
        expectedChallenge: challenge,
        expectedOrigin: [...rp.origins],
        expectedRPID: rp.rpId,
        requireUserVerification: true,
        supportedAlgorithmIDs: SUPPORTED_ALGORITHM_IDS,
      });
      info = result.verified ? result.registrationInfo : undefined;
    } catch (err) {
      log.info({ userId: user.id, reason: err instanceof Error ? err.message : 'malformed' }, 'passkey registration response refused');
    }
    if (info === undefined) throw invalidRegistration('the registration response does not verify (origin, RP ID, challenge, user verification or signature).');
    const idBytes = Buffer.from(info.credential.id, 'base64url').length;
    if (idBytes === 0 || idBytes > MAX_CREDENTIAL_ID_BYTES || info.credential.id !== response.id) {
      throw invalidRegistration(`the credential id must be 1 to ${MAX_CREDENTIAL_ID_BYTES} bytes and the one the response names.`);
    }
    const credProps = (response.clientExtensionResults as { credProps?: { rk?: unknown } }).credProps;
    if (credProps?.rk === false) throw invalidRegistration('the authenticator made a credential that is not discoverable (a resident key is required).');
    return info;
  };

  return {
    async registrationOptions(user) {
      await limiter.enforce(rules.passkeyRegistrationPerUser, user.id, 'auth.passkeys.too_many_attempts');
      const [handle, existing] = await Promise.all([userHandleOf(db, user.id, randomBytes(USER_HANDLE_BYTES)), listPasskeys(db, user.id)]);
      if (existing.length >= MAX_PASSKEYS_PER_USER) throw new AppError('auth.passkeys.limit_reached');
      if (handle === undefined) throw new AppError('auth.invalid_access_token');
      const options = await generateRegistrationOptions({
        rpName: rp.rpName,
        rpID: rp.rpId,
        userName: user.email ?? user.username,
        userDisplayName: user.username,
        userID: new Uint8Array(handle),
        timeout: WEBAUTHN_CHALLENGE_TTL_SECONDS * 1000,
        attestationType: 'none',
        excludeCredentials: existing.map((p) => ({ id: p.credential_id, transports: p.transports })),
        authenticatorSelection: { residentKey: 'required', userVerification: 'required' },
        supportedAlgorithmIDs: SUPPORTED_ALGORITHM_IDS,
      });
      const now = clock.now();
      await insertRegistrationChallenge(db, {
        id: randomUUID(),
        challenge: options.challenge,
        userId: user.id,
        now,
        expiresAt: expiresAt(now),
        keep: MAX_REGISTRATION_CHALLENGES_PER_USER,
      });
      // The library's type leaves optional what these arguments always produce (CreationOptionsSchema checks it on the way out).
      return options as CreationOptions;
    },

    async register(user, input, client) {
      const { challenge } = clientDataOf(input.response.response.clientDataJSON);
      if (challenge === undefined || !(await takeRegistrationChallenge(db, { userId: user.id, challenge, now: clock.now() }))) {
        throw invalidRegistration('the registration challenge is unknown, used or expired: ask for new registration options.');
      }
      const info = await verifyRegistration(input.response, challenge, user);
      const name = nameOrNull(input.name);
      const id = randomUUID();
      const outcome = await db.transaction(async (tx): Promise<'gone' | 'limit' | 'duplicate' | { noticed: boolean }> => {
        // The user's row lock serialises registrations, so parallel ones cannot pass the limit together.
        if (!(await lockUser(tx, user.id))) return 'gone';
        if ((await countPasskeys(tx, user.id)) >= MAX_PASSKEYS_PER_USER) return 'limit';
        const now = clock.now();
        const stored = await insertPasskey(tx, {
          id,
          userId: user.id,
          credentialId: info.credential.id,
          publicKey: info.credential.publicKey,
          counter: info.credential.counter,
          transports: (input.response.response.transports ?? []).filter((t) => KNOWN_TRANSPORTS.has(t)),
          deviceType: info.credentialDeviceType,
          backedUp: info.credentialBackedUp,
          name,
          now,
        });
        if (!stored) return 'duplicate';
        await recordEvent(tx, { type: 'passkey.added', data: { user_id: user.id, passkey_id: id } }, now);
        return { noticed: await queueUserNotice(tx, user, { kind: 'passkey_added', at: clock.now(), client, details: [passkeyNoticeLine({ name, created_at: now, last_used_at: null })] }) };
      });
      // The account was deleted since its access token was checked.
      if (outcome === 'gone') throw new AppError('auth.invalid_access_token');
      if (outcome === 'limit') throw new AppError('auth.passkeys.limit_reached');
      if (outcome === 'duplicate') throw invalidRegistration('this passkey is already registered.');
      if (outcome.noticed) onEmailQueued();
      metrics.passkeyChange('registered');
      securityEvent(log, 'passkey.registered', { userId: user.id, ip: client.ip });
      const row = await findPasskey(db, id);
      if (row === undefined) throw new AppError('auth.passkeys.not_found');
      return row;
    },

    async list(user) {
      return listPasskeys(db, user.id);
    },

    async rename(user, passkeyId, name) {
      await ownPasskey(user, passkeyId);
      const row = await renamePasskey(db, { id: passkeyId, userId: user.id, name: nameOrNull(name) });
      if (row === undefined) throw new AppError('auth.passkeys.not_found');
      return row;
    },

    async remove(user, passkeyId, client) {
      await ownPasskey(user, passkeyId);
      const outcome = await db.transaction(async (tx) => {
        const deleted = await deletePasskey(tx, { id: passkeyId, userId: user.id });
        if (deleted === undefined) return undefined;
        await recordEvent(tx, { type: 'passkey.removed', data: { user_id: user.id, passkey_id: deleted.id } }, clock.now());
        return { noticed: await queueUserNotice(tx, user, { kind: 'passkey_removed', at: clock.now(), client, details: [passkeyNoticeLine(deleted)] }) };
      });
      // Deleted meanwhile by a parallel request: it is gone, as asked, but this call did not delete it.
      if (outcome === undefined) throw new AppError('auth.passkeys.not_found');
      if (outcome.noticed) onEmailQueued();
      metrics.passkeyChange('deleted');
      securityEvent(log, 'passkey.deleted', { userId: user.id, ip: client.ip });
    },

    async authenticationOptions() {
      const options = await generateAuthenticationOptions({ rpID: rp.rpId, userVerification: 'required', timeout: WEBAUTHN_CHALLENGE_TTL_SECONDS * 1000 });
      const cookie = newRandomSecret();
      const now = clock.now();
      await insertWebauthnChallenge(db, {
        id: randomUUID(),
        purpose: 'authentication',
        challenge: options.challenge,
        userId: null,
        tokenHash: sha256(cookie),
        now,
        expiresAt: expiresAt(now),
      });
      return { options: options as RequestOptions, cookie, maxAgeSeconds: WEBAUTHN_CHALLENGE_TTL_SECONDS };
    },

    async verifyAuthentication(cookie, response, owner, client) {
      // The challenge is used up by any try, whatever comes next.
      const challenge = await takeAuthenticationChallenge(db, { tokenHash: sha256(cookie), now: clock.now() });
      if (challenge === undefined) throw refused('challenge_unknown_used_or_expired', client);
      if (owner === undefined) throw refused('unknown_credential', client);
      // The user handle the authenticator returns must be the owner's (W3C WebAuthn Level 3 §7.2 step 6).
      if (owner.webauthn_user_handle === null || response.response.userHandle !== Buffer.from(owner.webauthn_user_handle).toString('base64url')) {
        throw refused('user_handle_mismatch', client, owner.id);
      }
      const wrongOrigin = originRefusal(response.response.clientDataJSON, rp.origins);
      if (wrongOrigin !== undefined) throw refused('origin_not_allowed', client, owner.id, `The passkey response does not verify: ${wrongOrigin}`);
      const info = await verifyAssertion(response, challenge, owner);
      if (info === undefined) throw refused('assertion_not_verified', client, owner.id);
      return { newCounter: info.newCounter, backedUp: info.credentialBackedUp };
    },

    async recordAuthentication(owner, assertion, client) {
      // The counter must go up (a cloned authenticator, or one assertion used twice, is refused), atomically.
      if (!(await recordPasskeyUse(db, { id: owner.passkey_id, counter: assertion.newCounter, backedUp: assertion.backedUp, now: clock.now() }))) {
        throw refused('counter_not_increased', client, owner.id);
      }
    },
  };
}
