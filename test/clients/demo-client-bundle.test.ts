/**
 * The demo page (docs/api.md#demo-page) runs on @latchkey/client, inlined into its one nonce'd
 * script: src/modules/demo/latchkey-client.generated.ts holds the package bundled by esbuild as
 * a classic script that defines `LatchkeyClient`, with the options of the package's own
 * standalone build (dist/latchkey-client.min.js). This test bundles it again with
 * scripts/demo-client-bundle.mjs and fails when the committed copy differs; `npm run
 * demo-client` rewrites it with the same module.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { demoClientFile } from '../../scripts/demo-client-bundle.mjs';
import { LATCHKEY_CLIENT_SCRIPT } from '../../src/modules/demo/latchkey-client.generated.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..');

describe('the demo page carries the current @latchkey/client', () => {
  it('src/modules/demo/latchkey-client.generated.ts is the package bundled from its sources', async () => {
    const generated = await demoClientFile();
    const stale = 'the demo page bundle is stale: run `npm run demo-client`';
    expect(LATCHKEY_CLIENT_SCRIPT === generated.script, stale).toBe(true);
    expect(readFileSync(path.join(ROOT, generated.path), 'utf8'), stale).toBe(generated.text);
    // Inline in HTML: nothing that would end the script element or load anything.
    expect(generated.script).not.toMatch(/<\/script|<!--|https?:\/\//i);
  });
});
