import { ZxcvbnFactory } from '@zxcvbn-ts/core';
import { adjacencyGraphs, dictionary } from '@zxcvbn-ts/language-common';

/**
 * Builds the zxcvbn estimator with the dictionaries of @zxcvbn-ts/language-common (about 49,000
 * frequently used passwords and the 7,776 diceware words) and its keyboard layouts, allowing at
 * most `l33tMaxSubstitutions` l33t substitutions per password. Ranking the dictionaries takes
 * about 80 ms on the event loop.
 *
 * A module of its own so that password-policy.ts can import it, and with it the two zxcvbn
 * packages, when a password is first checked. Both packages are CommonJS: a static named import
 * of them works both under Node.js (dist/src/) and in the esbuild bundle (dist/service/), where a
 * dynamic `import()` of a CommonJS package yields only its `default` export.
 */
export function buildPasswordEstimator(l33tMaxSubstitutions: number): ZxcvbnFactory {
  return new ZxcvbnFactory({ dictionary, graphs: adjacencyGraphs, l33tMaxSubstitutions });
}
