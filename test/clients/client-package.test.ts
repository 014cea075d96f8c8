import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { bundleClient } from './browser-harness.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const CLIENT = path.join(ROOT, 'packages', 'client');
/** The budget of @latchkey/client, minified and gzipped: 8 kB. */
const MAX_GZIP_BYTES = 8 * 1024;

describe('@latchkey/client as a package', () => {
  it(`is at most ${MAX_GZIP_BYTES} bytes minified and gzipped (esbuild, zlib level 9)`, async () => {
    const minified = await bundleClient({ minify: true });
    const gzipped = gzipSync(minified, { level: 9 }).length;
    console.log(`@latchkey/client: ${minified.length} bytes minified, ${gzipped} bytes gzipped`);
    expect(gzipped).toBeLessThanOrEqual(MAX_GZIP_BYTES);
    // One self-contained ES module: nothing imported at run time.
    expect(Buffer.from(minified).toString('utf8')).not.toMatch(/\bimport\s*[({'"]|\brequire\(/);
  });

  it('has no runtime dependencies, and its build (tsc) emits an ES module with type declarations', () => {
    const pkg = JSON.parse(readFileSync(path.join(CLIENT, 'package.json'), 'utf8')) as Record<string, unknown>;
    expect(pkg.dependencies).toBeUndefined();
    expect(pkg.type).toBe('module');
    const outDir = mkdtempSync(path.join(tmpdir(), 'latchkey-client-build-'));
    try {
      execFileSync(process.execPath, [path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', path.join(CLIENT, 'tsconfig.build.json'), '--outDir', outDir], { stdio: 'pipe' });
      const files = readdirSync(outDir).sort();
      expect(files).toEqual(expect.arrayContaining(['index.js', 'index.d.ts', 'errors.js', 'token-keeper.js', 'types.d.ts']));
      expect(readFileSync(path.join(outDir, 'index.d.ts'), 'utf8')).toContain('export declare function createClient(options: ClientOptions): LatchkeyClient;');
    } finally {
      rmSync(outDir, { recursive: true, force: true });
    }
  }, 60_000);
});
