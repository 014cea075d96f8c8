// The esbuild options of every one-file build of @latchkey/client: the standalone ES module of
// the package (dist/latchkey-client.min.js, scripts/build.mjs) and the classic script of the
// service's demo page (src/modules/demo/latchkey-client.generated.ts, `npm run demo-client`).
// Both inline @simplewebauthn/browser and the passkey ceremonies that the package's own modules
// import with import() on first use: a one-file build has no chunk to load them from.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package's folder. */
export const CLIENT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** The standalone ES module's file name in dist/, and its export path (`@latchkey/client/latchkey-client.min.js`). */
export const STANDALONE_FILE = 'latchkey-client.min.js';

/**
 * The esbuild `build()` options of a one-file, minified build of the client.
 * @param format `'esm'`: an ES module exporting the package's API (`<script type="module">`);
 *   `'iife'`: a classic script that defines the global `LatchkeyClient` (the demo page).
 * @returns options for esbuild's `build`, with `write: false` (the caller writes the file).
 */
export function oneFileOptions(format) {
  return {
    absWorkingDir: CLIENT_DIR,
    entryPoints: [path.join(CLIENT_DIR, 'src', 'index.ts')],
    bundle: true,
    splitting: false,
    format,
    ...(format === 'iife' ? { globalName: 'LatchkeyClient' } : {}),
    // Every browser with Web Locks and BroadcastChannel (the client's cross-tab refresh) runs ES2022.
    target: 'es2022',
    platform: 'browser',
    minify: true,
    legalComments: 'none',
    // Without console calls: @simplewebauthn/browser's warnings (a call in its old form, a
    // browser extension's broken WebAuthn) cite its documentation by URL, and the demo page,
    // which makes exactly the calls of its client, carries no URL at all; the client's own
    // calls are all in the current form.
    drop: ['console'],
    write: false,
    logLevel: 'silent',
  };
}
