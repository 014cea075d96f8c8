/** A code email's facts: who it greets, the code, and how long the code lives. */
interface CodeEmailInput {
  readonly username: string;
  readonly code: string;
  readonly expiresInSeconds: number;
}

/**
 * The body every code email shares: the greeting, `codeLine` (which names the code), optional
 * `extra` lines, then how many whole minutes the code lasts (at least 1) and `ifNotYou`.
 */
function codeEmail(input: CodeEmailInput, t: { subject: string; codeLine: string; extra?: string; ifNotYou: string }): { subject: string; text: string } {
  const minutes = Math.max(1, Math.ceil(input.expiresInSeconds / 60));
  return {
    subject: t.subject,
    text: `Hello ${input.username},\n\n` + `${t.codeLine}\n` + (t.extra ?? '') + `It expires in ${minutes} minutes. ${t.ifNotYou}\n`,
  };
}

/** "What to send": the verification email for a code (docs/api.md#verification-codes). */
export function verificationEmail(input: CodeEmailInput): { subject: string; text: string } {
  return codeEmail(input, {
    subject: 'Verify your email address',
    codeLine: `Your email verification code is ${input.code}.`,
    ifNotYou: 'If you did not sign up, ignore this email.',
  });
}

/** The security notices the service sends (docs/api.md#security-notices). */
export type SecurityNoticeKind =
  | 'password_changed'
  | 'password_reset'
  | 'email_change_requested'
  | 'email_changed'
  | 'account_deleted'
  | 'mfa_enabled'
  | 'mfa_disabled'
  | 'recovery_codes_regenerated'
  | 'passkey_added'
  | 'passkey_removed'
  | 'mfa_codes_failing'
  | 'identity_linked'
  | 'identity_unlinked'
  | 'password_set';

/** What a notice says happened, and what the owner should do if it was not them. */
const NOTICE_TEXT: Record<SecurityNoticeKind, { subject: string; happened: string; ifNotYou: string }> = {
  password_changed: {
    subject: 'Your password was changed',
    happened: 'The password of your account was changed. Every session of the account was signed out.',
    ifNotYou: 'If you did not do this, someone else knows your password: reset your password at once and contact support.',
  },
  password_reset: {
    subject: 'Your password was reset',
    happened: 'The password of your account was reset with a code sent to this address. Every session of the account was signed out.',
    ifNotYou: 'If you did not do this, someone else can read this mailbox: secure your email account, then reset your password and contact support.',
  },
  email_change_requested: {
    subject: 'A change of your email address was requested',
    happened: 'Someone signed in to your account asked to move it to another email address. Nothing changes until the new address is confirmed.',
    ifNotYou: 'If you did not do this, someone else knows your password: change your password at once and contact support.',
  },
  email_changed: {
    subject: 'The email address of your account was changed',
    happened: 'Your account now uses another email address; this address no longer receives its emails.',
    ifNotYou: 'If you did not do this, contact support at once: someone else may control your account.',
  },
  account_deleted: {
    subject: 'Your account was deleted',
    happened: 'Your account was deleted, with its sessions, devices, codes, second factor and passkeys, its count of failed sign-ins, and the service\'s copies of earlier emails to this address. Its username and this address can be used for a new sign-up. The service keeps this notice (this address, the username, and the time, IP address and user agent above) for its email retention period, then deletes it.',
    ifNotYou: 'If you did not do this, someone else knew your password: contact support, and change that password wherever else you use it.',
  },
  mfa_enabled: {
    subject: 'Two-step sign-in was turned on',
    happened: 'Sign-in to your account now asks for a code from an authenticator app after the password. Ten recovery codes were shown once, for when the app is not at hand.',
    ifNotYou: 'If you did not do this, someone else controls your account: reset your password at once and contact support.',
  },
  mfa_disabled: {
    subject: 'Two-step sign-in was turned off',
    happened: 'Sign-in to your account no longer asks for a code from an authenticator app; the password alone signs in. The recovery codes no longer work.',
    ifNotYou: 'If you did not do this, someone else knows your password and had a code: reset your password at once, turn two-step sign-in on again, and contact support.',
  },
  recovery_codes_regenerated: {
    subject: 'New recovery codes were made',
    happened: 'A new set of ten recovery codes was made for your account; the earlier codes no longer work.',
    ifNotYou: 'If you did not do this, someone else knows your password and had a code: reset your password at once and contact support.',
  },
  passkey_added: {
    subject: 'A passkey was added to your account',
    happened: 'A passkey was added to your account. It signs in without the password or a code.',
    ifNotYou: 'If you did not do this, someone else controls your account: sign in, delete this passkey under Passkeys, reset your password, and contact support.',
  },
  mfa_codes_failing: {
    subject: 'Someone is trying codes to sign in to your account',
    happened: 'Someone who knows your password has typed several wrong codes from an authenticator app, or wrong recovery codes, for your account within the last hour. Two-step sign-in stopped them; after a few more tries they must wait an hour.',
    ifNotYou: 'If this was not you, someone else knows your password: change it at once (the sessions of the account are then signed out), and change it wherever else you use it.',
  },
  identity_linked: {
    subject: 'A sign-in provider was linked to your account',
    happened: 'An account at an identity provider was linked to your account. It signs in without the password.',
    ifNotYou: 'If you did not do this, someone else controls your account: sign in, unlink this provider under Sign-in providers, reset your password, and contact support.',
  },
  identity_unlinked: {
    subject: 'A sign-in provider was unlinked from your account',
    happened: 'An account at an identity provider was unlinked from your account; it no longer signs in.',
    ifNotYou: 'If you did not do this, someone else controls your account: reset your password, check the ways in the account still has, and contact support.',
  },
  password_set: {
    subject: 'A password was set for your account',
    happened: 'Your account, which had no password, now has one. It signs in with the password as well as before.',
    ifNotYou: 'If you did not do this, someone else controls your account: reset your password at once and contact support.',
  },
  passkey_removed: {
    subject: 'A passkey was removed from your account',
    happened: 'A passkey was removed from your account; it no longer signs in.',
    ifNotYou: 'If you did not do this, someone else controls your account: reset your password, check the passkeys the account still has, and contact support.',
  },
};

/**
 * "What to send": a security notice (docs/api.md#security-notices). It says what happened, when
 * (UTC), from which IP address and user agent, and what to do if it was not the owner. It never
 * carries a code or a link that acts on the account (OWASP ASVS 5.0 V6.3.7: notify the user of
 * changes to their authentication details). The user agent, which the requester chose, is
 * printed as {@link noticeQuote} neutralises it.
 * @param input.at when it happened; `ip` and `userAgent` null when unknown (an operator's command).
 */
export function securityNoticeEmail(input: {
  kind: SecurityNoticeKind;
  username: string;
  at: Date;
  ip: string | null;
  userAgent: string | null;
  /** Lines particular to the change, printed after what happened. */
  details?: readonly string[];
}): { subject: string; text: string } {
  const t = NOTICE_TEXT[input.kind];
  const when = input.at.toISOString().replace('T', ' ').replace(/\.\d{3}Z$/, ' UTC');
  const from = input.ip === null ? 'an operator of the service (no network address)' : input.ip;
  return {
    subject: t.subject,
    text:
      `Hello ${input.username},\n\n` +
      `${t.happened}\n\n` +
      (input.details === undefined || input.details.length === 0 ? '' : `${input.details.join('\n')}\n\n`) +
      `When: ${when}\n` +
      `From: ${from}\n` +
      `Browser or app: ${input.userAgent === null ? 'unknown' : noticeQuote(input.userAgent, NOTICE_MAX_USER_AGENT_LENGTH)}\n\n` +
      `${t.ifNotYou}\n` +
      `If it was you, there is nothing to do.\n`,
  };
}

/**
 * "What to send": the code that confirms a new email address (docs/api.md#change-email). It goes
 * to the new address; whoever reads it proves control of that mailbox. Nothing changes if the
 * code is never used.
 */
export function emailChangeEmail(input: CodeEmailInput): { subject: string; text: string } {
  return codeEmail(input, {
    subject: 'Confirm your new email address',
    codeLine: `Your code to confirm this address as the new email address of your account is ${input.code}.`,
    ifNotYou: 'If you did not ask for this, ignore this email: no account will use this address.',
  });
}

/**
 * The link of a password-reset email: `{PASSWORD_RESET_URL}#email=<urlencoded>&code=<code>`
 * (docs/api.md#request-a-password-reset). Built from the configured URL only, never from a
 * request's Host or X-Forwarded-* headers (a forged header must not send the code to another
 * site: OWASP Forgot Password Cheat Sheet, "do not rely on the Host header"). The values go in the fragment, which browsers never send to a
 * server, so the code stays out of access logs and Referer headers.
 */
export function passwordResetLink(baseUrl: string, email: string, code: string): string {
  return `${baseUrl}#email=${encodeURIComponent(email)}&code=${code}`;
}

/** "What to send": the password-reset email for a code, with the link when PASSWORD_RESET_URL is set (docs/api.md#request-a-password-reset). */
export function passwordResetEmail(input: CodeEmailInput & { link: string | undefined }): { subject: string; text: string } {
  return codeEmail(input, {
    subject: 'Reset your password',
    codeLine: `Your password reset code is ${input.code}.`,
    extra: input.link === undefined ? '' : `Or open this link to choose a new password: ${input.link}\n`,
    ifNotYou: 'If you did not ask to reset your password, ignore this email: your password stays as it is.',
  });
}

/**
 * Longest user agent a notice prints, in characters. Real browsers send under 200; the rest of a
 * longer one is only room for a message of the requester's own, so it is cut (with `…`).
 */
export const NOTICE_MAX_USER_AGENT_LENGTH = 200;

/**
 * C0 and C1 controls (`\p{Cc}`: U+0000 to U+001F, U+007F to U+009F, so NEL U+0085 too), the
 * line and paragraph separators, and the format characters (bidirectional overrides, zero-width
 * joiners): nothing a requester may put on a line of a notice, or of a message the service
 * repeats it in (src/modules/passkeys/passkey-origin.ts escapes them).
 */
export const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu;

/**
 * Text that a requester chose (a User-Agent header, a passkey name) as a security notice prints
 * it: the characters of {@link UNPRINTABLE} dropped, `.`, `:` and `@` bracketed (`[.]`), so no
 * mail client turns a web address (`evil[.]example/x`) or an email address into a link, cut to `maxLength`
 * characters (with `…`), and in double quotes (a `"` inside becomes `'`, so it cannot end the
 * quotation early), so it reads as a quotation and never as the service's own words. OWASP ASVS 5.0 V1.2 (output encoding for the context it goes into).
 * @param maxLength longest text kept, in characters (code points), before bracketing.
 */
export function noticeQuote(text: string, maxLength: number): string {
  const printable = [...text.replace(UNPRINTABLE, '')];
  const kept = printable.length > maxLength ? `${printable.slice(0, maxLength).join('')}…` : printable.join('');
  return `"${kept.replace(/"/g, "'").replace(/[.:@]/g, (c) => `[${c}]`)}"`;
}
