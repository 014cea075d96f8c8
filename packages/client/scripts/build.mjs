#!/usr/bin/env node
// Builds @latchkey/client into dist/: the ES modules and type declarations (tsc), for apps with a
// bundler, and dist/latchkey-client.min.js (esbuild), one self-contained ES module with
// @simplewebauthn/browser inlined, for a page without a bundler (README.md, "Without a bundler").
//
// Run by `npm run build`, by npm itself as `prepack` (`npm pack`), and by the checkout's root
// `prepare`, which `npm ci` runs, so that a folder install (`npm install <this folder>`, which
// runs no script of the package) finds dist/ built (README.md, "Install"). It needs the checkout's development dependencies (typescript,
// esbuild), found in the checkout's node_modules: a folder install or pack of a checkout where
// `npm ci` has not run stops with a message saying so.
//
// The files are built beside dist/ and renamed into place (scripts/build-into-place.mjs), so a
// process reading dist/ while a build runs (a test, a bundler in watch mode) never reads a
// half-written file.
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { buildIntoPlace } from '../../../scripts/build-into-place.mjs';
import { CLIENT_DIR, oneFileOptions, STANDALONE_FILE } from './esbuild-options.mjs';

const require = createRequire(import.meta.url);

/** The path of a development dependency, or a clear stop when the checkout has none installed. */
function tool(request) {
  try {
    return require.resolve(request);
  } catch {
    process.stderr.write(
      `@latchkey/client: cannot build: ${request.split('/')[0]} is not installed. Run \`npm ci\` in the Latchkey checkout first ` +
        '(it installs the tools that build the packages), then install or pack the package again.\n',
    );
    process.exit(1);
  }
}

const tsc = tool('typescript/bin/tsc');
const { build } = await import(tool('esbuild'));

await buildIntoPlace(CLIENT_DIR, async (staging) => {
  const compiled = spawnSync(process.execPath, [tsc, '-p', path.join(CLIENT_DIR, 'tsconfig.build.json'), '--outDir', staging], { stdio: 'inherit' });
  if (compiled.status !== 0) throw new Error(`tsc failed (exit ${compiled.status ?? 'signal'})`);
  const standalone = await build(oneFileOptions('esm'));
  writeFileSync(path.join(staging, STANDALONE_FILE), standalone.outputFiles[0].contents);
});
