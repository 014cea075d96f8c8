// The password policy measured on samples (docs/security.md, "Password policy"): how many random
// passwords it accepts, how many common ones it refuses, and how long a check takes.
//
//   npm run build && node bench/password-policy.mjs [random passwords per length]
//
// Runs the built policy (dist/src/modules/users/password-policy.js) with the length check of
// sign-up in front of it (dist/src/crypto/password.js), so "refused" counts what sign-up refuses.
// Samples:
// - random: passwords of 8 to 12 characters drawn uniformly from printable ASCII (U+0020 to
//   U+007E, 95 characters, the space included) with node:crypto (not seeded, so rates vary a
//   little from run to run); 200 per length by default, 1,000 in all;
// - common: the 1,000 highest-ranked entries of the common-password list shipped in
//   @zxcvbn-ts/language-common (`passwords-common`, ranked by frequency in public password
//   leaks), as they are and lightly decorated (capitalised with `1!` appended; `2024` appended;
//   capitalised with `2024!` appended);
// - long: 72 random printable characters, the longest password the service takes (the check's
//   worst case, docs/performance.md).
// Times are per checkPassword call on this thread, after one warm-up call that builds zxcvbn's
// dictionaries. Prints a table; takes a few seconds.
import { randomInt } from 'node:crypto';
import { dictionary } from '@zxcvbn-ts/language-common';
import { normalizePassword } from '../dist/src/crypto/password.js';
import { checkPassword, SERVICE_NAME } from '../dist/src/modules/users/password-policy.js';

/** Printable ASCII: U+0020 (space) to U+007E (tilde). */
const PRINTABLE = Array.from({ length: 0x7e - 0x20 + 1 }, (_, i) => String.fromCharCode(0x20 + i)).join('');
const LENGTHS = [8, 9, 10, 11, 12];
/** 1,000 random passwords in all over the five lengths, unless the command line asks for more. */
const PER_LENGTH = Number(process.argv[2] ?? 200);
/** The top of the ranked common-password list that is measured. */
const COMMON_COUNT = 1000;
/** 72 code points: the contract's maximum. */
const LONGEST = 72;
const LONG_SAMPLES = 50;
/** An account whose identifiers share nothing with the samples. */
const CONTEXT = { username: 'bench_user', email: 'jane.doe@example.test', serviceName: SERVICE_NAME };

if (!(PER_LENGTH >= 1)) throw new Error('usage: password-policy.mjs [random passwords per length]');

function randomPassword(length) {
  let password = '';
  for (let i = 0; i < length; i++) password += PRINTABLE[randomInt(PRINTABLE.length)];
  return password;
}

/** Sign-up's verdict on `password`: 'length', a policy rule, or undefined (accepted); with the check's time in ms. */
async function verdict(password) {
  const normalized = normalizePassword(password);
  if (normalized === undefined) return { refused: 'length', ms: 0 };
  const start = performance.now();
  const violation = await checkPassword(normalized, CONTEXT);
  return { refused: violation?.rule, ms: performance.now() - start };
}

function quantile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

/** Runs a sample; returns counts, refusals by rule and check times. */
async function measure(passwords) {
  const byRule = {};
  const times = [];
  let accepted = 0;
  let tooShort = 0;
  for (const password of passwords) {
    const { refused, ms } = await verdict(password);
    if (refused === 'length') {
      tooShort++;
      continue;
    }
    times.push(ms);
    if (refused === undefined) accepted++;
    else byRule[refused] = (byRule[refused] ?? 0) + 1;
  }
  times.sort((a, b) => a - b);
  return { total: passwords.length, tooShort, checked: times.length, accepted, byRule, times };
}

const percent = (n, d) => (d === 0 ? '-' : `${((100 * n) / d).toFixed(2)} %`);
const ms = (times) => (times.length === 0 ? '-' : `median ${quantile(times, 0.5).toFixed(2)} ms, p99 ${quantile(times, 0.99).toFixed(2)} ms, max ${times[times.length - 1].toFixed(2)} ms`);
const rules = (byRule) => Object.entries(byRule).sort((a, b) => b[1] - a[1]).map(([rule, n]) => `${rule} ${n}`).join(', ') || 'none';

const began = performance.now();
await checkPassword('warm-up passphrase', CONTEXT); // builds zxcvbn's dictionaries (once per process)

console.log(`random printable ASCII, ${PER_LENGTH} per length`);
const allRandomTimes = [];
let randomAccepted = 0;
let randomTotal = 0;
for (const length of LENGTHS) {
  const r = await measure(Array.from({ length: PER_LENGTH }, () => randomPassword(length)));
  allRandomTimes.push(...r.times);
  randomAccepted += r.accepted;
  randomTotal += r.total;
  console.log(`  length ${String(length).padStart(2)}: accepted ${r.accepted}/${r.total} (${percent(r.accepted, r.total)}); refused by ${rules(r.byRule)}`);
}
allRandomTimes.sort((a, b) => a - b);
console.log(`  all: accepted ${randomAccepted}/${randomTotal} (${percent(randomAccepted, randomTotal)}); check ${ms(allRandomTimes)}`);

const common = dictionary['passwords-common'].slice(0, COMMON_COUNT).map(String);
const capitalise = (w) => w.charAt(0).toUpperCase() + w.slice(1);
for (const [name, sample] of [
  [`the ${COMMON_COUNT} most common passwords (@zxcvbn-ts/language-common passwords-common)`, common],
  ['  the same, capitalised with 1! appended', common.map((w) => `${capitalise(w)}1!`)],
  ['  the same, with 2024 appended', common.map((w) => `${w}2024`)],
  ['  the same, capitalised with 2024! appended', common.map((w) => `${capitalise(w)}2024!`)],
]) {
  const r = await measure(sample);
  const refused = r.total - r.accepted;
  console.log(`${name}: refused ${refused}/${r.total} (${percent(refused, r.total)}): ${r.tooShort} shorter than 8, of the ${r.checked} others the policy refused ${r.checked - r.accepted} (${percent(r.checked - r.accepted, r.checked)}; ${rules(r.byRule)}); check ${ms(r.times)}`);
}

const long = await measure(Array.from({ length: LONG_SAMPLES }, () => randomPassword(LONGEST)));
console.log(`${LONG_SAMPLES} random ${LONGEST}-character passwords: accepted ${long.accepted}/${long.total}; check ${ms(long.times)}`);
console.log(`(${((performance.now() - began) / 1000).toFixed(1)} s)`);
