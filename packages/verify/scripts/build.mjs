#!/usr/bin/env node
// Builds @latchkey/verify into dist/: ES modules and type declarations (tsc).
//
// Run by `npm run build`, by npm itself as `prepack` (`npm pack`), and by the checkout's root
// `prepare`, which `npm ci` runs, so that a folder install (`npm install <this folder>`, which
// runs no script of the package) finds dist/ built (README.md, "Install"). It needs the checkout's development dependencies (typescript), found in
// the checkout's node_modules: a folder install or pack of a checkout where `npm ci` has not run
// stops with a message saying so.
//
// The files are built beside dist/ and renamed into place (scripts/build-into-place.mjs).
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildIntoPlace } from '../../../scripts/build-into-place.mjs';

const require = createRequire(import.meta.url);
const dir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

let tsc;
try {
  tsc = require.resolve('typescript/bin/tsc');
} catch {
  process.stderr.write(
    '@latchkey/verify: cannot build: typescript is not installed. Run `npm ci` in the Latchkey checkout first ' +
      '(it installs the tools that build the packages), then install or pack the package again.\n',
  );
  process.exit(1);
}

await buildIntoPlace(dir, (staging) => {
  const compiled = spawnSync(process.execPath, [tsc, '-p', path.join(dir, 'tsconfig.build.json'), '--outDir', staging], { stdio: 'inherit' });
  if (compiled.status !== 0) throw new Error(`tsc failed (exit ${compiled.status ?? 'signal'})`);
});
