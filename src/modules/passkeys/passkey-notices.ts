import type { PasskeyRow } from './passkeys.repo.js';

/** How a notice names a passkey: `Passkey: <name>`, or `Passkey: (no name)`. */
export function passkeyNoticeName(name: string | null): string {
  return name === null ? 'Passkey: (no name)' : `Passkey: ${name}`;
}

/**
 * The lines a password-reset notice adds about the account's passkeys, which a reset does not
 * delete: none when it has none, else a warning and one line per passkey, oldest first. A passkey
 * registered by someone who once had the account (an XSS, a stolen session) would otherwise
 * outlive the reset unseen.
 */
export function passkeyNoticeLines(passkeys: readonly Pick<PasskeyRow, 'name'>[]): string[] {
  if (passkeys.length === 0) return [];
  return ['The account keeps its passkeys; each still signs in. Delete any you do not recognise under Passkeys:', ...passkeys.map((p) => passkeyNoticeName(p.name))];
}
