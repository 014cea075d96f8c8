import { noticeQuote } from '../mail/mail.templates.js';
import type { PasskeyRow } from './passkeys.repo.js';
import { MAX_PASSKEY_NAME_LENGTH } from './passkeys.schemas.js';

/** A time in a notice: `2026-03-02 09:15 UTC`. */
function minute(at: Date): string {
  return `${at.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

/**
 * A passkey's name as a notice prints it ({@link noticeQuote}: in quotes, with `.`, `:` and `@`
 * bracketed, so that a name someone else chose, `evil.example/reset`, is not turned into a link
 * by a mail client); `(no name)` when it has none.
 */
export function noticeNameOf(name: string | null): string {
  return name === null ? '(no name)' : noticeQuote(name, MAX_PASSKEY_NAME_LENGTH);
}

/**
 * How a notice names a passkey: its name, when it was added and when it last signed in. The
 * times, unlike the name, are the service's: an intruder can name a passkey like the owner's,
 * not date it.
 */
export function passkeyNoticeLine(passkey: Pick<PasskeyRow, 'name' | 'created_at' | 'last_used_at'>): string {
  const used = passkey.last_used_at === null ? 'never used to sign in' : `last signed in ${minute(passkey.last_used_at)}`;
  return `Passkey ${noticeNameOf(passkey.name)}, added ${minute(passkey.created_at)}, ${used}`;
}

/**
 * The lines a password-reset notice adds about the account's passkeys, which a reset does not
 * delete: none when it has none, else a warning and one line per passkey, oldest first. A passkey
 * registered by someone who once had the account (an XSS, a stolen session) would otherwise
 * outlive the reset unseen.
 */
export function passkeyNoticeLines(passkeys: readonly Pick<PasskeyRow, 'name' | 'created_at' | 'last_used_at'>[]): string[] {
  if (passkeys.length === 0) return [];
  return ['The account keeps its passkeys; each still signs in. Delete any you do not recognise under Passkeys:', ...passkeys.map(passkeyNoticeLine)];
}
