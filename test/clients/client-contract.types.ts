/**
 * Compile-time half of the client's contract (test/clients/client-contract.ts): every type the
 * client declares for a body or an answer equals `Static<typeof schema>` of the schema its route
 * uses, both ways (vitest's `expectTypeOf(...).toEqualTypeOf()`: a member missing on either side,
 * an optional one the schema requires, a wider or narrower type, all fail). Nothing here runs:
 * `npm run typecheck` compiles it with test/clients/tsconfig.contract.json, which gives it the
 * browser's library (the client's sources need it) besides Node's (the service's schemas).
 */
import type { Static } from '@sinclair/typebox';
import { expectTypeOf } from 'vitest';
import type { LatchkeyClient } from '../../packages/client/src/index.js';
import type { Identity, Passkey, Provider, RefreshResponse, Session, User } from '../../packages/client/src/types.js';
import { IdentitySchema, ProviderSchema } from '../../src/modules/oauth/oauth.schemas.js';
import { PasskeySchema } from '../../src/modules/passkeys/passkeys.schemas.js';
import { SessionSchema } from '../../src/modules/sessions/sessions.schemas.js';
import { UserSchema } from '../../src/modules/users/users.schemas.js';
import { CLIENT_CONTRACT, type ContractOperation } from './client-contract.js';

type C = typeof CLIENT_CONTRACT;
/** The body type the route's schema accepts. */
type Body<K extends ContractOperation> = C[K] extends { body: infer S extends import('@sinclair/typebox').TSchema } ? Static<S> : never;
/** The answer type the route's schema serialises (void for a 204). */
type Answer<K extends ContractOperation> = C[K]['response'] extends infer S extends import('@sinclair/typebox').TSchema ? Static<S> : void;
/** What a method resolves to. */
type Resolves<F> = F extends (...args: never[]) => Promise<infer R> ? R : never;

type Client = LatchkeyClient;
/** Members that make no request of their own (local state, a navigation, listening). */
type Local = 'ready' | 'signedIn' | 'sessionId' | 'accessToken' | 'fetch' | 'on' | 'close' | 'signInWithProvider' | 'readProviderError';
/** Every request-making operation of the client, by its path on the client object. */
type ClientOperations = {
  [K in Exclude<keyof Client, Local>]: Client[K] extends (...args: never[]) => unknown ? K : `${K}.${keyof Client[K] & string}`;
}[Exclude<keyof Client, Local>];

// The table covers the client exactly: no operation of the client left unchecked, none in the table that the client lacks.
expectTypeOf<ClientOperations>().toEqualTypeOf<ContractOperation>();

// The shared objects.
expectTypeOf<User>().toEqualTypeOf<Static<typeof UserSchema>>();
expectTypeOf<Session>().toEqualTypeOf<Static<typeof SessionSchema>>();
expectTypeOf<Passkey>().toEqualTypeOf<Static<typeof PasskeySchema>>();
expectTypeOf<Identity>().toEqualTypeOf<Static<typeof IdentitySchema>>();
expectTypeOf<Provider>().toEqualTypeOf<Static<typeof ProviderSchema>>();

// The core: the body is the first argument.
expectTypeOf<Parameters<Client['signUp']>[0]>().toEqualTypeOf<Body<'signUp'>>();
expectTypeOf<Resolves<Client['signUp']>>().toEqualTypeOf<Answer<'signUp'>>();
expectTypeOf<Parameters<Client['verifyEmail']>[0]>().toEqualTypeOf<Body<'verifyEmail'>>();
expectTypeOf<Resolves<Client['verifyEmail']>>().toEqualTypeOf<Answer<'verifyEmail'>>();
expectTypeOf<Parameters<Client['resendVerification']>[0]>().toEqualTypeOf<Body<'resendVerification'>>();
expectTypeOf<Resolves<Client['resendVerification']>>().toEqualTypeOf<Answer<'resendVerification'>>();
expectTypeOf<Parameters<Client['signIn']>[0]>().toEqualTypeOf<Body<'signIn'>>();
expectTypeOf<Resolves<Client['signIn']>>().toEqualTypeOf<Answer<'signIn'>>();
// refresh() resolves to a boolean; the answer's type is the TokenKeeper's.
expectTypeOf<RefreshResponse>().toEqualTypeOf<Answer<'refresh'>>();
expectTypeOf<Resolves<Client['logout']>>().toEqualTypeOf<Answer<'logout'>>();
expectTypeOf<Resolves<Client['me']>>().toEqualTypeOf<Answer<'me'>>();
expectTypeOf<Parameters<Client['changePassword']>[0]>().toEqualTypeOf<Body<'changePassword'>>();
expectTypeOf<Resolves<Client['changePassword']>>().toEqualTypeOf<Answer<'changePassword'>>();
expectTypeOf<Parameters<Client['changeEmail']>[0]>().toEqualTypeOf<Body<'changeEmail'>>();
expectTypeOf<Resolves<Client['changeEmail']>>().toEqualTypeOf<Answer<'changeEmail'>>();
expectTypeOf<Parameters<Client['confirmEmailChange']>[0]>().toEqualTypeOf<Body<'confirmEmailChange'>>();
expectTypeOf<Resolves<Client['confirmEmailChange']>>().toEqualTypeOf<Answer<'confirmEmailChange'>>();
expectTypeOf<Parameters<Client['deleteAccount']>[0]>().toEqualTypeOf<Body<'deleteAccount'>>();
expectTypeOf<Resolves<Client['deleteAccount']>>().toEqualTypeOf<Answer<'deleteAccount'>>();
expectTypeOf<Parameters<Client['requestPasswordReset']>[0]>().toEqualTypeOf<Body<'requestPasswordReset'>>();
expectTypeOf<Resolves<Client['requestPasswordReset']>>().toEqualTypeOf<Answer<'requestPasswordReset'>>();
expectTypeOf<Parameters<Client['confirmPasswordReset']>[0]>().toEqualTypeOf<Body<'confirmPasswordReset'>>();
expectTypeOf<Resolves<Client['confirmPasswordReset']>>().toEqualTypeOf<Answer<'confirmPasswordReset'>>();

// client.mfa
expectTypeOf<Parameters<Client['mfa']['verify']>[0]>().toEqualTypeOf<Body<'mfa.verify'>>();
expectTypeOf<Resolves<Client['mfa']['verify']>>().toEqualTypeOf<Answer<'mfa.verify'>>();
expectTypeOf<Parameters<Client['mfa']['setUp']>[0]>().toEqualTypeOf<Body<'mfa.setUp'>>();
expectTypeOf<Resolves<Client['mfa']['setUp']>>().toEqualTypeOf<Answer<'mfa.setUp'>>();
expectTypeOf<Parameters<Client['mfa']['enable']>[0]>().toEqualTypeOf<Body<'mfa.enable'>>();
expectTypeOf<Resolves<Client['mfa']['enable']>>().toEqualTypeOf<Answer<'mfa.enable'>>();
expectTypeOf<Parameters<Client['mfa']['disable']>[0]>().toEqualTypeOf<Body<'mfa.disable'>>();
expectTypeOf<Resolves<Client['mfa']['disable']>>().toEqualTypeOf<Answer<'mfa.disable'>>();
expectTypeOf<Parameters<Client['mfa']['regenerateRecoveryCodes']>[0]>().toEqualTypeOf<Body<'mfa.regenerateRecoveryCodes'>>();
expectTypeOf<Resolves<Client['mfa']['regenerateRecoveryCodes']>>().toEqualTypeOf<Answer<'mfa.regenerateRecoveryCodes'>>();

// client.sessions: the path's session id is the argument.
expectTypeOf<Resolves<Client['sessions']['list']>>().toEqualTypeOf<Answer<'sessions.list'>>();
expectTypeOf<Parameters<Client['sessions']['revoke']>>().toEqualTypeOf<[sessionId: string]>();
expectTypeOf<Resolves<Client['sessions']['revoke']>>().toEqualTypeOf<Answer<'sessions.revoke'>>();
expectTypeOf<Resolves<Client['sessions']['revokeAll']>>().toEqualTypeOf<Answer<'sessions.revokeAll'>>();

// client.passkeys: the ceremonies put the browser's credential in `response`; the rest of the body is the caller's.
expectTypeOf<NonNullable<Parameters<Client['passkeys']['register']>[0]>>().toEqualTypeOf<Omit<Body<'passkeys.register'>, 'response'>>();
expectTypeOf<Resolves<Client['passkeys']['register']>>().toEqualTypeOf<Answer<'passkeys.register'>>();
expectTypeOf<keyof Body<'passkeys.signIn'>>().toEqualTypeOf<'response'>();
expectTypeOf<Parameters<Client['passkeys']['signIn']>>().toEqualTypeOf<[]>();
expectTypeOf<Resolves<Client['passkeys']['signIn']>>().toEqualTypeOf<Answer<'passkeys.signIn'>>();
expectTypeOf<Resolves<Client['passkeys']['list']>>().toEqualTypeOf<Answer<'passkeys.list'>>();
expectTypeOf<Parameters<Client['passkeys']['rename']>[1]>().toEqualTypeOf<Body<'passkeys.rename'>['name']>();
expectTypeOf<Resolves<Client['passkeys']['rename']>>().toEqualTypeOf<Answer<'passkeys.rename'>>();
expectTypeOf<Resolves<Client['passkeys']['delete']>>().toEqualTypeOf<Answer<'passkeys.delete'>>();

// Identity providers.
expectTypeOf<Resolves<Client['providers']>>().toEqualTypeOf<Answer<'providers'>>();
// linkProvider's options carry `redirect_to` as `redirectTo`, and it navigates to the answer's URL.
expectTypeOf<{ redirect_to?: NonNullable<Parameters<Client['linkProvider']>[1]>['redirectTo'] }>().toEqualTypeOf<Body<'linkProvider'>>();
expectTypeOf<Resolves<Client['identities']>>().toEqualTypeOf<Answer<'identities'>>();
expectTypeOf<Resolves<Client['unlinkIdentity']>>().toEqualTypeOf<Answer<'unlinkIdentity'>>();
expectTypeOf<Parameters<Client['setPassword']>[0]>().toEqualTypeOf<Body<'setPassword'>>();
expectTypeOf<Resolves<Client['setPassword']>>().toEqualTypeOf<Answer<'setPassword'>>();
expectTypeOf<Resolves<Client['jwks']>>().toEqualTypeOf<Answer<'jwks'>>();
