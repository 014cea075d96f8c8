import type { RateLimitSettings } from '../../config.js';
import type { RateLimitRule } from './rate-limits.service.js';

/** Window of the sign-in and verification limits: 15 minutes (issue 3 point 1). */
export const FAILURE_WINDOW_SECONDS = 15 * 60;
/** Window of the sign-up limit: one hour. */
export const SIGN_UP_WINDOW_SECONDS = 60 * 60;
/** One resend per address per 60 s (decisions.md §6); not configurable. */
export const RESEND_WINDOW_SECONDS = 60;

/** Every rate limit of the service, built once from the settings. */
export interface RateLimitRules {
  readonly signInPerIdentifier: RateLimitRule;
  readonly signInPerIp: RateLimitRule;
  /** Wrong current passwords at change-password, per user: a stolen access token must not give unlimited guesses. */
  readonly changePasswordPerUser: RateLimitRule;
  readonly signUpPerIp: RateLimitRule;
  readonly verifyPerAddress: RateLimitRule;
  readonly resendPerAddress: RateLimitRule;
}

/** Builds the rules from the configured limits. */
export function rateLimitRules(settings: RateLimitSettings): RateLimitRules {
  return {
    signInPerIdentifier: { name: 'sign_in_identifier', limit: settings.signInPerIdentifier, windowSeconds: FAILURE_WINDOW_SECONDS },
    signInPerIp: { name: 'sign_in_ip', limit: settings.signInPerIp, windowSeconds: FAILURE_WINDOW_SECONDS },
    changePasswordPerUser: { name: 'change_password_user', limit: settings.signInPerIdentifier, windowSeconds: FAILURE_WINDOW_SECONDS },
    signUpPerIp: { name: 'sign_up_ip', limit: settings.signUpPerIp, windowSeconds: SIGN_UP_WINDOW_SECONDS },
    verifyPerAddress: { name: 'verify_address', limit: settings.verifyPerAddress, windowSeconds: FAILURE_WINDOW_SECONDS },
    resendPerAddress: { name: 'resend', limit: 1, windowSeconds: RESEND_WINDOW_SECONDS },
  };
}
