import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../../clock.js';
import type { Db } from '../../db/db.js';
import { AppError } from '../../errors.js';
import { securityEvent } from '../audit/security-events.js';
import { queueUserNotice } from '../mail/notices.js';
import type { ClientContext } from '../../plugins/client-context.js';
import type { Authenticated, SessionsService } from '../sessions/sessions.service.js';
import { UUID_PATTERN } from '../tokens/access-token.service.js';
import { lockUserRow } from '../users/users.shared.js';
import { recordEvent } from '../events/events.shared.js';
import { deleteIdentity, findIdentityById, hasOtherSignInMethod, listIdentities, type IdentityRow } from './identities.repo.js';
import type { OAuthProviders } from './oauth-providers.js';

/** Dependencies of {@link createIdentitiesService}. */
export interface IdentitiesDeps {
  readonly db: Db;
  readonly clock: Clock;
  readonly sessions: Pick<SessionsService, 'requireRecentSignIn'>;
  /** For the provider's display name in notices. */
  readonly providers: Pick<OAuthProviders, 'get'>;
  readonly log: FastifyBaseLogger;
  readonly onEmailQueued: () => void;
}

/** The caller's identities at providers (docs/api.md#list-identities, docs/api.md#unlink-an-identity). */
export interface IdentitiesService {
  /** The caller's identities, oldest first. */
  list(caller: Authenticated): Promise<IdentityRow[]>;
  /**
   * Unlinks one of the caller's identities, in one transaction under the user's row lock: never
   * the last way to sign in (no password, no passkey, no other identity), with an
   * `identity_unlinked` notice. Checks, in order: a recent sign-in, the identity, its owner, the
   * other ways in.
   * @throws AppError `auth.reauthentication_required` (401), `auth.identities.not_found` (404;
   *   also for an id that is not a UUID), `auth.identities.forbidden` (403),
   *   `auth.identities.last_sign_in_method` (409).
   */
  unlink(caller: Authenticated, identityId: string, client: ClientContext): Promise<void>;
}

/** Builds the {@link IdentitiesService}. */
export function createIdentitiesService(deps: IdentitiesDeps): IdentitiesService {
  const { db, clock, sessions, providers, log, onEmailQueued } = deps;
  return {
    list: (caller) => listIdentities(db, caller.user.id),

    async unlink(caller, identityId, client) {
      await sessions.requireRecentSignIn(caller);
      if (!UUID_PATTERN.test(identityId)) throw new AppError('auth.identities.not_found');
      const userId = caller.user.id;
      const outcome = await db.transaction(async (tx) => {
        // The user row first (as every change of a user's ways in), then its identities.
        const user = await lockUserRow(tx, userId);
        const identity = await findIdentityById(tx, identityId);
        if (identity === undefined || user === undefined) return 'not_found' as const;
        if (identity.user_id !== userId) return 'forbidden' as const;
        if (!(await hasOtherSignInMethod(tx, userId, identityId))) return 'last' as const;
        if (!(await deleteIdentity(tx, identityId, userId))) return 'not_found' as const;
        await recordEvent(tx, { type: 'identity.unlinked', data: { user_id: userId, identity_id: identity.id, provider: identity.provider } }, clock.now());
        const name = providers.get(identity.provider)?.name ?? identity.provider;
        const noticed = await queueUserNotice(tx, user, { kind: 'identity_unlinked', at: clock.now(), client, details: [`Provider: ${name}`] });
        return { noticed, provider: identity.provider };
      });
      if (outcome === 'not_found') throw new AppError('auth.identities.not_found');
      if (outcome === 'forbidden') throw new AppError('auth.identities.forbidden');
      if (outcome === 'last') throw new AppError('auth.identities.last_sign_in_method');
      if (outcome.noticed) onEmailQueued();
      securityEvent(log, 'identity.unlinked', { userId, sessionId: caller.session.id, ip: client.ip, provider: outcome.provider });
    },
  };
}
