import type { MatchExtended, ZxcvbnFactory, ZxcvbnResult } from '@zxcvbn-ts/core';

/**
 * The service's name: a context-specific word that no password may contain (NIST SP 800-63B-4
 * §3.1.1.2 names "the name of the service" as such a word).
 */
export const SERVICE_NAME = 'auth-service';

/**
 * Lowest accepted zxcvbn score. Score 3 means an estimated 10^8 guesses or more ("safely
 * unguessable: moderate protection from an offline slow-hash scenario"), far beyond what the
 * sign-in rate limits let an online attacker try; score 2 (10^6 to 10^8) admits
 * `correcthorse` and `auth-service2024!`.
 */
const MIN_ZXCVBN_SCORE = 3;

/**
 * A single match from the common-password list that spans at least this share of the password
 * (in UTF-16 code units, as zxcvbn counts) makes it "too common", whatever the score: the
 * password is such a password with a little decoration (`iloveyou!`, `P@ssw0rd1`).
 * A passphrase of several words never has one word spanning three quarters of it.
 */
const COMMON_PASSWORD_SHARE = 0.75;

/**
 * Context words shorter than this (after separators are dropped) are not looked for: two
 * letters occur by chance in too many passphrases. Also the shortest username (spec §8).
 */
const MIN_CONTEXT_WORD_LENGTH = 3;

/**
 * Substitution variants the l33t matcher tries per password (the library's default is 100).
 * On this service's longest passwords (72 random or l33t-prone characters) 100 variants cost
 * a median of about 75 ms of event-loop time per check, 20 variants about 25 ms; the common
 * l33t passwords (`p4$$w0rd`, `P@ssw0rd!`, `m0nk3y123`) are found with far fewer.
 */
const L33T_MAX_SUBSTITUTIONS = 20;

/** Dictionary names of @zxcvbn-ts/language-common and of zxcvbn's user-input dictionary. */
const COMMON_PASSWORDS = 'passwords-common';
const USER_INPUTS = 'userInputs';

/** Why a password was refused; `reason` is a public message (it never repeats the password). */
export interface PasswordPolicyViolation {
  /** Which rule refused it: a context word, the common-password list, or the guess estimate. */
  readonly rule: 'username' | 'email' | 'service_name' | 'common' | 'guessable';
  readonly reason: string;
}

/** What the password must not be made of: the account's own identifiers and the service's name. */
export interface PasswordContext {
  /** The (normalised) username. */
  readonly username: string;
  /** The (normalised) email address, if the account has one. */
  readonly email?: string | null | undefined;
  /** Usually {@link SERVICE_NAME}. */
  readonly serviceName: string;
}

const REASONS = {
  username: 'password must not contain the username.',
  email: 'password must not contain the part of the email address before the @.',
  service_name: 'password must not contain the name of the service.',
  common: 'password is too common: it is on lists of frequently used passwords.',
} as const;

/** How each kind of guessable part is named in the "too easy to guess" message. */
const PATTERN_NAMES: Record<string, string> = {
  dictionary: 'common words or passwords',
  userInputs: 'the username, email address or service name',
  spatial: 'keyboard patterns',
  repeat: 'repeated characters',
  sequence: 'sequences such as abc or 123',
  wordSequence: 'series such as days, months or numbers',
  date: 'dates',
  regex: 'years',
};

let zxcvbn: Promise<ZxcvbnFactory> | undefined;

/**
 * The zxcvbn estimator with the dictionaries of @zxcvbn-ts/language-common (about 49,000
 * frequently used passwords and the 7,776 diceware words) and its keyboard layouts.
 * Loaded and built on first use, and kept for the process: importing the modules (about 30 ms)
 * and ranking the dictionaries (about 80 ms, all on the event loop) would otherwise delay every
 * start, or, done right after the service listens, its first answers (docs/performance.md). The
 * first password check of a process pays for it once.
 */
function passwordEstimator(): Promise<ZxcvbnFactory> {
  zxcvbn ??= (async () => {
    const [{ ZxcvbnFactory }, { adjacencyGraphs, dictionary }] = await Promise.all([import('@zxcvbn-ts/core'), import('@zxcvbn-ts/language-common')]);
    return new ZxcvbnFactory({ dictionary, graphs: adjacencyGraphs, l33tMaxSubstitutions: L33T_MAX_SUBSTITUTIONS });
  })();
  return zxcvbn;
}

/** NFKC, lower case: how passwords and context words are compared. */
function fold(text: string): string {
  return text.normalize('NFKC').toLowerCase();
}

/** Letters and digits only, so `alice_smith` is also found in `Alice.Smith` and `alicesmith`. */
function compact(text: string): string {
  return text.replace(/[^\p{L}\p{N}]/gu, '');
}

interface ContextWord {
  readonly rule: 'username' | 'email' | 'service_name';
  /** The folded word and its compact form. */
  readonly forms: readonly string[];
}

/** The context words of NIST SP 800-63B-4 §3.1.1.2 this service knows: username, email local part, service name. */
function contextWords(context: PasswordContext): ContextWord[] {
  const candidates: [ContextWord['rule'], string][] = [['username', context.username]];
  if (context.email != null && context.email !== '') {
    const at = context.email.lastIndexOf('@');
    const local = at === -1 ? context.email : context.email.slice(0, at);
    candidates.push(['email', local]);
    // A subaddress (`alice+shop@`) is decoration: the mailbox name alone counts too.
    const plus = local.indexOf('+');
    if (plus > 0) candidates.push(['email', local.slice(0, plus)]);
  }
  candidates.push(['service_name', context.serviceName]);
  const words: ContextWord[] = [];
  for (const [rule, raw] of candidates) {
    const folded = fold(raw);
    const forms = [...new Set([folded, compact(folded)])].filter((f) => f.length >= MIN_CONTEXT_WORD_LENGTH);
    if (forms.length > 0) words.push({ rule, forms });
  }
  return words;
}

/**
 * zxcvbn user inputs: each context word, its compact form, and its parts (`alice`, `smith` of
 * `alice.smith`), so that partial use lowers the estimate without refusing outright.
 */
function userInputs(words: readonly ContextWord[]): string[] {
  const inputs = new Set<string>();
  for (const word of words) {
    for (const form of word.forms) {
      inputs.add(form);
      for (const part of form.split(/[^\p{L}\p{N}]+/u)) if (part.length >= MIN_CONTEXT_WORD_LENGTH) inputs.add(part);
    }
  }
  return [...inputs];
}

function isDictionaryMatch(match: MatchExtended): match is MatchExtended & { dictionaryName: string; matchedWord: string } {
  return match.pattern === 'dictionary';
}

/** The "too easy to guess" message, naming the kinds of guessable parts zxcvbn found. */
function guessableReason(result: ZxcvbnResult): string {
  const parts = new Set<string>();
  for (const match of result.sequence) {
    const key = isDictionaryMatch(match) && match.dictionaryName === USER_INPUTS ? USER_INPUTS : match.pattern;
    const name = PATTERN_NAMES[key];
    if (name !== undefined) parts.add(name);
  }
  const made = parts.size === 0 ? 'it is too short for the characters it uses' : `it is made of ${[...parts].join(', ')}`;
  return `password is too easy to guess: ${made}. A few unrelated words make a stronger password.`;
}

/**
 * Checks a password against the policy of NIST SP 800-63B-4 §3.1.1.2 (issue 3 point 3): no
 * composition rules; refused are passwords that
 * 1. contain a context-specific word: the username, the email address's local part (and its
 *    mailbox name without a `+tag`) or the service name, compared after NFKC and lower-casing,
 *    also with separators dropped (`Alice.Smith` for `alice_smith`) and, through zxcvbn's
 *    user-input matching, in l33t or reversed form (`4l1c3_sm1th`);
 * 2. are (mostly) a commonly used password: one match from the common-password list of
 *    @zxcvbn-ts/language-common, also l33t, reversed or capitalised, spans at least
 *    {@link COMMON_PASSWORD_SHARE} of the password (`password123`, `qwertyuiop`, `iloveyou!`);
 * 3. are easy to guess: zxcvbn (common passwords, diceware words, keyboard patterns, repeats,
 *    sequences, dates, with the context words as user inputs) estimates fewer than 10^8 guesses
 *    (score below {@link MIN_ZXCVBN_SCORE}).
 * Passphrases such as `correct horse battery staple` and random 12-character strings pass.
 *
 * Length (8 to 72 code points) is not checked here; `normalizePassword` does that first.
 * CPU only, on the calling thread: about 1 ms for a typical password, a median of about 25 ms
 * for 72 random characters (up to ~90 ms on a busy machine); asynchronous only because the first
 * call loads zxcvbn and builds its dictionaries (~100 ms, {@link passwordEstimator}).
 *
 * @param password the password as it will be hashed (NFKC-normalised; normalised again here).
 * @param context the account's username and email (normalised) and the service name.
 * @returns undefined when the password is acceptable, else the rule and a public reason.
 */
export async function checkPassword(password: string, context: PasswordContext): Promise<PasswordPolicyViolation | undefined> {
  const folded = fold(password);
  const compacted = compact(folded);
  const words = contextWords(context);
  for (const word of words) {
    const whole = word.forms[0]!;
    const squeezed = word.forms[word.forms.length - 1]!;
    if (folded.includes(whole) || compacted.includes(squeezed)) return { rule: word.rule, reason: REASONS[word.rule] };
  }

  const normalized = password.normalize('NFKC');
  const result = (await passwordEstimator()).check(normalized, userInputs(words));
  const dictionaryMatches = result.sequence.filter(isDictionaryMatch);
  for (const match of dictionaryMatches) {
    if (match.dictionaryName !== USER_INPUTS) continue;
    const word = words.find((w) => w.forms.includes(match.matchedWord));
    if (word !== undefined) return { rule: word.rule, reason: REASONS[word.rule] };
  }
  const commonShare = Math.max(0, ...dictionaryMatches.filter((m) => m.dictionaryName === COMMON_PASSWORDS).map((m) => m.token.length / normalized.length));
  if (commonShare >= COMMON_PASSWORD_SHARE) return { rule: 'common', reason: REASONS.common };
  if (result.score < MIN_ZXCVBN_SCORE) return { rule: 'guessable', reason: guessableReason(result) };
  return undefined;
}
