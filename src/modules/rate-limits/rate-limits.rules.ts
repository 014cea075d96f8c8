import type { RateLimitSettings } from '../../config.js';
import type { RateLimitRule } from './rate-limits.service.js';

/** Window of the sign-in and verification limits per client: 15 minutes. */
export const FAILURE_WINDOW_SECONDS = 15 * 60;
/** Window of the limits counted per hour: sign-ups and resends per client, failed sign-ins per account (NIST SP 800-63B-4 §3.2.2 counts per account). */
export const HOUR_WINDOW_SECONDS = 60 * 60;
/** One resend per address per 60 s (docs/decisions.md, "Verification codes"); not configurable. */
export const RESEND_WINDOW_SECONDS = 60;

/** Window of the admin API's per-key limit: a minute, so a backend's burst is judged over a short span. */
export const ADMIN_WINDOW_SECONDS = 60;

/** Window of the notices sent at most once a day. */
export const DAY_WINDOW_SECONDS = 24 * 60 * 60;

/**
 * Wrong second-factor codes for one account within its hour window after which its owner is
 * told that someone who knows the password is trying codes: half the default per-account limit
 * (RATE_LIMIT_MFA_PER_ACCOUNT, 10), so the notice leaves while the guesser still has codes to
 * try, and above what a fumbling owner types.
 */
export const MFA_FAILURE_NOTICE_THRESHOLD = 5;

/**
 * Passkey sign-in options a client may ask for per sign-in attempt it is allowed: a sign-in page
 * asks for options when it loads, again after a cancelled prompt, and in every open tab, while
 * each asks stores a challenge; four per allowed attempt bounds those writes without refusing a
 * real page.
 */
export const PASSKEY_OPTIONS_PER_SIGN_IN = 4;

/**
 * Passkey registration options a user may ask for per sign-in attempt it is allowed
 * (RATE_LIMIT_SIGN_IN_PER_IDENTIFIER per 15 minutes, so 20 by default): a registration page asks
 * again after a cancelled prompt, and each ask stores a challenge.
 */
export const PASSKEY_REGISTRATION_OPTIONS_PER_ATTEMPT = 2;

/**
 * Identity-provider flows (authorize, link) a client may start per sign-in attempt it is
 * allowed: as passkey options, a sign-in page may start one, be abandoned at the provider and
 * start again, in several tabs, and each start stores a flow.
 */
export const OAUTH_FLOWS_PER_SIGN_IN = 4;

/**
 * Names of the rules counted per account (`subject: 'account'`): their rows are keyed
 * `<name>:<user id>` in the clear, and account deletion deletes them (src/modules/accounts/).
 */
export const ACCOUNT_RULE_NAMES = ['sign_in_account'] as const;

/** Every rate limit of the service, built once from the settings. */
export interface RateLimitRules {
  /** Failed sign-ins naming one identifier from one client network: a stranger elsewhere cannot lock the owner out. */
  readonly signInPerIdentifier: RateLimitRule;
  readonly signInPerIp: RateLimitRule;
  /** Failed sign-ins per account, whichever identifier named it and wherever they came from. */
  readonly signInPerAccount: RateLimitRule;
  /**
   * The same count for identifiers that name no account, keyed by their HMAC: never consulted,
   * it exists so that a failed sign-in costs the same write whether or not the account exists
   * (ASVS 5.0 V6.3.8, timing).
   */
  readonly signInPerUnknownAccount: RateLimitRule;
  /**
   * Checks of a signed-in user's current password (change-password, delete-account,
   * change-email, second-factor setup, disable and regeneration), every one counted before
   * argon2id and a right password taken back, per user: one budget for all of them, so a stolen
   * access token gets as many guesses as one operation would give (src/modules/users/current-password.ts).
   */
  readonly currentPasswordPerUser: RateLimitRule;
  readonly signUpPerIp: RateLimitRule;
  /** Failed verifications per client network (the 5 tries of each code bound the guesses per address). */
  readonly verifyPerIp: RateLimitRule;
  readonly resendPerAddress: RateLimitRule;
  readonly resendPerIp: RateLimitRule;
  /** Password-reset requests per address: one per {@link RESEND_WINDOW_SECONDS}, known address or not. */
  readonly passwordResetPerAddress: RateLimitRule;
  /** Password-reset requests per client network. */
  readonly passwordResetPerIp: RateLimitRule;
  /** Failed password-reset confirmations per client network (the 5 tries of each code bound the guesses per address). */
  readonly passwordResetConfirmPerIp: RateLimitRule;
  /** Email-change requests per user, every one counted before argon2id: each may mail a code, and a wrong password is a guess. */
  readonly changeEmailPerUser: RateLimitRule;
  /** Failed email-change confirmations per client network (the 5 tries of each code bound the guesses per request). */
  readonly changeEmailConfirmPerIp: RateLimitRule;
  /** Wrong codes of a pending authenticator at enable, per user (no second factor is on yet; a guess there proves nothing). */
  readonly mfaManagePerUser: RateLimitRule;
  /**
   * Wrong second-factor codes per account, from anywhere, wherever they are typed (the sign-in
   * second step, disable, regeneration): bounds the guesses of someone who has the password.
   */
  readonly mfaSignInPerAccount: RateLimitRule;
  /**
   * The "someone is trying codes" notice, per account: at most one a day
   * ({@link MFA_FAILURE_NOTICE_THRESHOLD} wrong codes within the hour window send it).
   */
  readonly mfaFailureNoticePerAccount: RateLimitRule;
  /** Wrong second-factor codes at sign-in per client network. */
  readonly mfaSignInPerIp: RateLimitRule;
  /** Passkey sign-in options per client network, every one counted: each stores a challenge. */
  readonly passkeyOptionsPerIp: RateLimitRule;
  /** Passkey registration options per user, every one counted: each stores a challenge (the oldest beyond a few are replaced). */
  readonly passkeyRegistrationPerUser: RateLimitRule;
  /** Admin API requests per API key (its id), every authenticated request counted (docs/admin-api.md#rate-limit). */
  readonly adminPerKey: RateLimitRule;
  /** Identity-provider flows started (authorize and link) per client network, every one counted: each stores a flow. */
  readonly oauthFlowsPerIp: RateLimitRule;
}

/** Builds the rules from the configured limits. */
export function rateLimitRules(settings: RateLimitSettings): RateLimitRules {
  return {
    signInPerIdentifier: { name: 'sign_in_identifier_client', subject: 'secret', limit: settings.signInPerIdentifier, windowSeconds: FAILURE_WINDOW_SECONDS },
    signInPerIp: { name: 'sign_in_ip', subject: 'client', limit: settings.signInPerIp, windowSeconds: FAILURE_WINDOW_SECONDS },
    signInPerAccount: { name: ACCOUNT_RULE_NAMES[0], subject: 'account', limit: settings.signInPerAccount, windowSeconds: HOUR_WINDOW_SECONDS },
    signInPerUnknownAccount: { name: 'sign_in_unknown_account', subject: 'secret', limit: settings.signInPerAccount, windowSeconds: HOUR_WINDOW_SECONDS },
    currentPasswordPerUser: { name: 'current_password_user', subject: 'secret', limit: settings.signInPerIdentifier, windowSeconds: FAILURE_WINDOW_SECONDS },
    signUpPerIp: { name: 'sign_up_ip', subject: 'client', limit: settings.signUpPerIp, windowSeconds: HOUR_WINDOW_SECONDS },
    verifyPerIp: { name: 'verify_ip', subject: 'client', limit: settings.verifyPerIp, windowSeconds: FAILURE_WINDOW_SECONDS },
    resendPerAddress: { name: 'resend', subject: 'secret', limit: 1, windowSeconds: RESEND_WINDOW_SECONDS },
    resendPerIp: { name: 'resend_ip', subject: 'client', limit: settings.resendPerIp, windowSeconds: HOUR_WINDOW_SECONDS },
    passwordResetPerAddress: { name: 'password_reset', subject: 'secret', limit: 1, windowSeconds: RESEND_WINDOW_SECONDS },
    passwordResetPerIp: { name: 'password_reset_ip', subject: 'client', limit: settings.passwordResetPerIp, windowSeconds: HOUR_WINDOW_SECONDS },
    passwordResetConfirmPerIp: { name: 'password_reset_confirm_ip', subject: 'client', limit: settings.passwordResetConfirmPerIp, windowSeconds: FAILURE_WINDOW_SECONDS },
    changeEmailPerUser: { name: 'change_email_user', subject: 'secret', limit: settings.changeEmailPerUser, windowSeconds: HOUR_WINDOW_SECONDS },
    changeEmailConfirmPerIp: { name: 'change_email_confirm_ip', subject: 'client', limit: settings.changeEmailConfirmPerIp, windowSeconds: FAILURE_WINDOW_SECONDS },
    mfaManagePerUser: { name: 'mfa_manage_user', subject: 'secret', limit: settings.signInPerIdentifier, windowSeconds: FAILURE_WINDOW_SECONDS },
    mfaSignInPerAccount: { name: 'mfa_sign_in_account', subject: 'secret', limit: settings.mfaPerAccount, windowSeconds: HOUR_WINDOW_SECONDS },
    mfaFailureNoticePerAccount: { name: 'mfa_failure_notice', subject: 'secret', limit: 1, windowSeconds: DAY_WINDOW_SECONDS },
    mfaSignInPerIp: { name: 'mfa_sign_in_ip', subject: 'client', limit: settings.mfaPerIp, windowSeconds: FAILURE_WINDOW_SECONDS },
    passkeyRegistrationPerUser: {
      name: 'passkey_registration_user',
      subject: 'secret',
      limit: settings.signInPerIdentifier * PASSKEY_REGISTRATION_OPTIONS_PER_ATTEMPT,
      windowSeconds: FAILURE_WINDOW_SECONDS,
    },
    passkeyOptionsPerIp: { name: 'passkey_options_ip', subject: 'client', limit: settings.signInPerIp * PASSKEY_OPTIONS_PER_SIGN_IN, windowSeconds: FAILURE_WINDOW_SECONDS },
    adminPerKey: { name: 'admin_key', subject: 'secret', limit: settings.adminPerKey, windowSeconds: ADMIN_WINDOW_SECONDS },
    oauthFlowsPerIp: { name: 'oauth_flows_ip', subject: 'client', limit: settings.signInPerIp * OAUTH_FLOWS_PER_SIGN_IN, windowSeconds: FAILURE_WINDOW_SECONDS },
  };
}
