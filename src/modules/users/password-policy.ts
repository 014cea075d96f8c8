import type { MatchExtended, ZxcvbnFactory, ZxcvbnResult } from '@zxcvbn-ts/core';
import type { BreachedPasswordCheck } from './breached-passwords.js';

/**
 * The service's name: a context-specific word that no password may contain (NIST SP 800-63B-4
 * §3.1.1.2 names "the name of the service" as such a word).
 */
export const SERVICE_NAME = 'latchkey';

/**
 * Share of the password (in UTF-16 code units, as zxcvbn counts) that zxcvbn's patterns must
 * cover for a password under {@link PATTERN_MIN_GUESSES} to be refused: at least half, i.e.
 * the password is mostly words, names, keyboard walks, repeats, sequences or dates rather than
 * random characters. Measured (bench/password-policy.mjs, docs/security.md §5): it refuses
 * about 1 in 1,000 random printable 8-character passwords (9 to 11 of 10,000, for an
 * incidental 4-character l33t word, repeat or sequence), at most 1 in 10,000 of 9 characters
 * and none longer. A common word with a year and a symbol is covered well beyond half
 * (`dragon2024!` 10 of 11, `pass2024!` 8 of 9); with only zxcvbn's own reading, in which
 * `2024!` is five random characters, `dragon2024!` would be 6 of 11 and `pass2024!` 4 of 9
 * ({@link patternsOf}).
 */
const PATTERN_SHARE = 0.5;

/**
 * Guesses zxcvbn must estimate for a password that is mostly patterns ({@link PATTERN_SHARE}):
 * 10^8, zxcvbn's score-3 line ("safely unguessable: moderate protection from an offline
 * slow-hash scenario"), the threshold this policy applied to every password before. Patterns
 * are what zxcvbn models well (a word's rank, a walk's turns, a date's range), so for them its
 * estimate is the attacker's cost: `correcthorse` (10^6.4), `mondaytuesday` (10^6.6) and
 * `dragon2024!` (10^7) stay refused, `correct horse battery staple` (10^19.7) passes.
 *
 * Passwords mostly of random characters get no guess threshold. zxcvbn prices a random
 * character at 10 guesses (its brute-force cardinality; printable ASCII has 95), so it puts no
 * 8-character password above 10^8 and scored every one below 3: that made the contract's
 * 8-character minimum unreachable. A floor for them would refuse nothing either: with less
 * than half of an n-character password in patterns, at least floor(n/2) + 1 characters are
 * brute force, 10^(floor(n/2) + 1) guesses, times at least 50 for a multi-character match and
 * 2 for the order of the two parts: 10^7 at 8 and 9 characters, 10^8 at 10 and 11, and so on
 * (measured minimum 10^7.0). A floor at score 2 (10^6) or at 10^7 would never fire.
 */
const PATTERN_MIN_GUESSES = 1e8;

/**
 * A single match from the common-password list that spans at least this share of the password
 * (in UTF-16 code units, as zxcvbn counts) makes it "too common", whatever the score: the
 * password is such a password with a little decoration (`iloveyou!`, `P@ssw0rd1`).
 * A passphrase of several words never has one word spanning three quarters of it.
 */
const COMMON_PASSWORD_SHARE = 0.75;

/**
 * Context words shorter than this (after separators are dropped) are not looked for: two
 * letters occur by chance in too many passphrases. Also the shortest username (docs/api.md#rules).
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

/**
 * A kind of guessable part that zxcvbn finds, named by the rule that refuses a password made
 * mostly of it: common words (including diceware words and common passwords that do not
 * span {@link COMMON_PASSWORD_SHARE}), such words in l33t or reversed, parts of the context
 * words, keyboard walks, repeats, sequences (of characters or of words such as `onetwothree`),
 * dates and years.
 */
export type PatternKind = 'words' | 'l33t' | 'reversed' | 'user_inputs' | 'keyboard' | 'repeat' | 'sequence' | 'date';

/** Why a password was refused; `reason` is a public message (it never repeats the password). */
export interface PasswordPolicyViolation {
  /**
   * Which rule refused it: a context word, the common-password list, or, for a password mostly
   * made of patterns, the kind of pattern that covers most of it (`guessable` if zxcvbn reports
   * a kind this module does not know).
   */
  readonly rule: 'username' | 'email' | 'service_name' | 'common' | PatternKind | 'guessable' | 'breached';
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
  breached: 'password has appeared in a data breach; choose another one.',
} as const;

/** How a password is checked besides the local rules. */
export interface PasswordCheckOptions {
  /**
   * The breached-password check (PASSWORD_BREACH_CHECK=hibp), asked only for a password every
   * local rule accepts; undefined: none.
   */
  readonly breached?: BreachedPasswordCheck | undefined;
}

/** How each kind of pattern is named in the "too easy to guess" message. */
const PATTERN_NAMES: Record<PatternKind, string> = {
  words: 'common words or passwords',
  l33t: 'common words with letters swapped for look-alike digits or symbols',
  reversed: 'common words written backwards',
  user_inputs: 'parts of your username, your email address or the name of the service',
  keyboard: 'a keyboard pattern',
  repeat: 'repeated characters',
  sequence: 'a sequence of letters, digits or words in order',
  date: 'a date or a year',
};

/** The advice every "too easy to guess" message ends with (NIST SP 800-63B-4 §3.1.1.2: say why, help choose). */
const GUESSABLE_ADVICE = 'Add more words or random characters.';

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

/**
 * The kind of pattern a zxcvbn match is; undefined for brute force (random characters) and for
 * separators (the single character between the words of a passphrase), which name nothing.
 */
function patternKind(match: MatchExtended): PatternKind | 'unknown' | undefined {
  switch (match.pattern) {
    case 'bruteforce':
    case 'separator':
      return undefined;
    case 'dictionary':
      if (isDictionaryMatch(match) && match.dictionaryName === USER_INPUTS) return 'user_inputs';
      if (match['l33t'] === true) return 'l33t';
      if (match['reversed'] === true) return 'reversed';
      return 'words';
    case 'spatial':
      return 'keyboard';
    case 'repeat':
      return 'repeat';
    case 'sequence':
    case 'wordSequence':
      return 'sequence';
    case 'date':
    case 'regex': // zxcvbn's only regex is recent years (1900 to 2029)
      return 'date';
    default:
      return 'unknown';
  }
}

/**
 * The patterns of a password: the share of it they cover, and their kinds ordered by how much
 * each covers (most first; equal ones in the order they occur).
 *
 * From zxcvbn's guess sequence, and inside each of its brute-force parts from a check of that
 * part on its own (`recheck`): zxcvbn adds 10^4 guesses for every further part of a sequence,
 * so it reads `pass2024!` as `pass` and five random characters (10^7 guesses) rather than
 * `pass`, `2024` and `!` (10^8 and more); the year is a pattern all the same. Only called for
 * estimates under {@link PATTERN_MIN_GUESSES}, whose brute-force parts are at most 7 characters
 * (each costs 10 guesses in zxcvbn's model), so the extra checks are short ones.
 */
function patternsOf(result: ZxcvbnResult, length: number, recheck: (token: string) => ZxcvbnResult): { share: number; kinds: (PatternKind | 'unknown')[] } {
  let covered = 0;
  const byKind = new Map<PatternKind | 'unknown', number>();
  const add = (match: MatchExtended): void => {
    covered += match.token.length;
    const kind = patternKind(match);
    if (kind !== undefined) byKind.set(kind, (byKind.get(kind) ?? 0) + match.token.length);
  };
  for (const match of result.sequence) {
    if (match.pattern !== 'bruteforce') add(match);
    else for (const part of recheck(match.token).sequence) if (part.pattern !== 'bruteforce') add(part);
  }
  const kinds = [...byKind].sort((a, b) => b[1] - a[1]).map(([kind]) => kind);
  return { share: covered / length, kinds };
}

/** The "too easy to guess" violation for a password mostly made of `kinds` (most covering first). */
function guessable(kinds: readonly (PatternKind | 'unknown')[]): PasswordPolicyViolation {
  const known = kinds.filter((k): k is PatternKind => k !== 'unknown');
  if (known.length === 0) return { rule: 'guessable', reason: `password is too easy to guess. ${GUESSABLE_ADVICE}` };
  const names = known.map((k) => PATTERN_NAMES[k]);
  const list = names.length === 1 ? names[0]! : `${names.slice(0, -1).join(', ')} and ${names[names.length - 1]!}`;
  return { rule: known[0]!, reason: `password is too easy to guess: it is mostly ${list}. ${GUESSABLE_ADVICE}` };
}

/**
 * Checks a password against the policy of NIST SP 800-63B-4 §3.1.1.2: a blocklist of commonly
 * used, expected or compromised values and of context-specific words, no composition rules and
 * no strength meter. Refused are passwords that
 * 1. contain a context-specific word: the username, the email address's local part (and its
 *    mailbox name without a `+tag`) or the service name, compared after NFKC and lower-casing,
 *    also with separators dropped (`Alice.Smith` for `alice_smith`) and, through zxcvbn's
 *    user-input matching, in l33t or reversed form (`4l1c3_sm1th`);
 * 2. are (mostly) a commonly used password: one match from the common-password list of
 *    @zxcvbn-ts/language-common, also l33t, reversed or capitalised, spans at least
 *    {@link COMMON_PASSWORD_SHARE} of the password (`password123`, `qwertyuiop`, `iloveyou!`);
 * 3. are mostly patterns and still easy to guess: zxcvbn estimates fewer than
 *    {@link PATTERN_MIN_GUESSES} guesses and its non-brute-force matches (common and diceware
 *    words, l33t and reversed words, parts of the context words, keyboard walks, repeats,
 *    sequences, dates and years), also those inside its brute-force parts checked on their own,
 *    cover at least {@link PATTERN_SHARE} of the password (`correcthorse`, `poiuytre`,
 *    `aaaaaaaa`, `abcdefgh`, `19901231`, `dragon2024!`, `pass2024!`); the message names the
 *    kinds of pattern, the most covering first, and the rule is that kind.
 * 4. with `options.breached` (PASSWORD_BREACH_CHECK=hibp), have appeared in a data breach:
 *    asked only when rules 1 to 3 accept, so a common password is refused without a network
 *    call; fails open (src/modules/users/breached-passwords.ts). Every place that sets a
 *    password calls this function with the service's check.
 * Random passwords of 8 characters and more pass (`Qz7#mK2$`; 99.9 % of random printable
 * 8-character ones, docs/security.md §5), as do passphrases such as `correct horse battery staple`.
 *
 * Length (8 to 72 code points) is not checked here; `normalizePassword` does that first.
 * Rules 1 to 3 are CPU only, on the calling thread: about 1 ms for a typical password, a median
 * of 8 to 25 ms for 72 random characters depending on the machine (up to ~90 ms on a busy one);
 * rule 3 adds a walk over zxcvbn's few matches and, under 10^8 guesses only, a check of each
 * brute-force part (at most 7 characters there). The first call loads zxcvbn and builds its
 * dictionaries (~100 ms, {@link passwordEstimator}). Rule 4 adds one HTTP request of at most 2 s.
 *
 * @param password the password as it will be hashed (NFKC-normalised; normalised again here).
 * @param context the account's username and email (normalised) and the service name.
 * @param options.breached the breached-password check, if the service has one configured.
 * @returns undefined when the password is acceptable, else the rule and a public reason that
 *   says which rule in plain words and never repeats the password.
 */
export async function checkPassword(password: string, context: PasswordContext, options: PasswordCheckOptions = {}): Promise<PasswordPolicyViolation | undefined> {
  const local = await localViolation(password, context);
  if (local !== undefined || options.breached === undefined) return local;
  return (await options.breached(password)) ? { rule: 'breached', reason: REASONS.breached } : undefined;
}

/** Rules 1 to 3 of {@link checkPassword}: CPU only, no network. */
async function localViolation(password: string, context: PasswordContext): Promise<PasswordPolicyViolation | undefined> {
  const folded = fold(password);
  const compacted = compact(folded);
  const words = contextWords(context);
  for (const word of words) {
    const whole = word.forms[0]!;
    const squeezed = word.forms[word.forms.length - 1]!;
    if (folded.includes(whole) || compacted.includes(squeezed)) return { rule: word.rule, reason: REASONS[word.rule] };
  }

  const normalized = password.normalize('NFKC');
  const estimator = await passwordEstimator();
  const inputs = userInputs(words);
  const result = estimator.check(normalized, inputs);
  const dictionaryMatches = result.sequence.filter(isDictionaryMatch);
  for (const match of dictionaryMatches) {
    if (match.dictionaryName !== USER_INPUTS) continue;
    const word = words.find((w) => w.forms.includes(match.matchedWord));
    if (word !== undefined) return { rule: word.rule, reason: REASONS[word.rule] };
  }
  const commonShare = Math.max(0, ...dictionaryMatches.filter((m) => m.dictionaryName === COMMON_PASSWORDS).map((m) => m.token.length / normalized.length));
  if (commonShare >= COMMON_PASSWORD_SHARE) return { rule: 'common', reason: REASONS.common };
  if (result.guesses >= PATTERN_MIN_GUESSES) return undefined;
  const patterns = patternsOf(result, normalized.length, (token) => estimator.check(token, inputs));
  if (patterns.share >= PATTERN_SHARE) return guessable(patterns.kinds);
  return undefined;
}
