import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { bundleClient } from './browser-harness.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const CLIENT = path.join(ROOT, 'packages', 'client');
/** The budget of @latchkey/client, minified and gzipped: 8 kB. */
const MAX_GZIP_BYTES = 8 * 1024;

describe('@latchkey/client as a package', () => {
  it(`is at most ${MAX_GZIP_BYTES} bytes minified and gzipped (esbuild, zlib level 9), passkey ceremonies included`, async () => {
    const minified = await bundleClient({ minify: true });
    const gzipped = gzipSync(minified, { level: 9 }).length;
    console.log(`@latchkey/client: ${minified.length} bytes minified, ${gzipped} bytes gzipped`);
    expect(gzipped).toBeLessThanOrEqual(MAX_GZIP_BYTES);
    // One self-contained ES module: nothing imported at run time (the import() of the passkey
    // ceremonies is inlined when the bundler does not split).
    expect(Buffer.from(minified).toString('utf8')).not.toMatch(/\bimport\s*[({'"]|\brequire\(/);
  });

  it('bundled by an app with code splitting, @simplewebauthn/browser is in the chunk of the first passkey operation, not in what a page loads at start', async () => {
    const result = await build({
      entryPoints: [path.join(CLIENT, 'src', 'index.ts')],
      bundle: true,
      splitting: true,
      format: 'esm',
      target: 'es2022',
      minify: true,
      outdir: path.join(tmpdir(), 'latchkey-client-split'),
      write: false,
      metafile: true,
      logLevel: 'silent',
    });
    const outputs = result.metafile.outputs;
    const entry = Object.keys(outputs).find((file) => outputs[file]!.entryPoint !== undefined)!;
    // What the page loads at start: the entry and what it imports statically.
    const atStart = new Set([entry]);
    for (const file of atStart) for (const i of outputs[file]!.imports) if (i.kind === 'import-statement') atStart.add(i.path);
    const lazy = Object.keys(outputs).filter((file) => !atStart.has(file));
    const inputsOf = (files: Iterable<string>) => [...files].flatMap((file) => Object.keys(outputs[file]!.inputs));
    expect(inputsOf(atStart).filter((input) => input.includes('@simplewebauthn'))).toEqual([]);
    expect(inputsOf(lazy).some((input) => input.includes('node_modules/@simplewebauthn/browser/'))).toBe(true);
    expect(inputsOf(lazy)).toContain(path.relative(process.cwd(), path.join(CLIENT, 'src', 'passkeys.ts')));
    const gzippedOf = (files: Iterable<string>) =>
      [...files].reduce((sum, file) => sum + gzipSync(result.outputFiles.find((o) => path.relative(process.cwd(), o.path) === file)!.contents, { level: 9 }).length, 0);
    console.log(`@latchkey/client split: ${gzippedOf(atStart)} bytes gzipped at start, ${gzippedOf(lazy)} bytes gzipped on the first passkey operation`);
    expect(gzippedOf(atStart)).toBeLessThanOrEqual(MAX_GZIP_BYTES);
  });

  it('has one runtime dependency, @simplewebauthn/browser, imported on first use; its build (tsc) emits ES modules with type declarations', () => {
    const pkg = JSON.parse(readFileSync(path.join(CLIENT, 'package.json'), 'utf8')) as Record<string, unknown>;
    expect(Object.keys((pkg.dependencies ?? {}) as object)).toEqual(['@simplewebauthn/browser']);
    expect(pkg.type).toBe('module');
    const outDir = mkdtempSync(path.join(tmpdir(), 'latchkey-client-build-'));
    try {
      execFileSync(process.execPath, [path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', path.join(CLIENT, 'tsconfig.build.json'), '--outDir', outDir], { stdio: 'pipe' });
      const files = readdirSync(outDir).sort();
      expect(files).toEqual(expect.arrayContaining(['index.js', 'index.d.ts', 'errors.js', 'token-keeper.js', 'passkeys.js', 'types.d.ts']));
      expect(readFileSync(path.join(outDir, 'index.d.ts'), 'utf8')).toContain('export declare function createClient(options: ClientOptions): LatchkeyClient;');
      // The entry module loads the ceremonies with import(), never with a static import.
      const index = readFileSync(path.join(outDir, 'index.js'), 'utf8');
      expect(index).toContain("import('./passkeys.js')");
      expect(index).not.toMatch(/^import [^\n]*['"]@simplewebauthn\/browser['"]/m);
      expect(index).not.toMatch(/^import [^\n]*['"]\.\/passkeys\.js['"]/m);
      expect(readFileSync(path.join(outDir, 'passkeys.js'), 'utf8')).toMatch(/^import [^\n]*['"]@simplewebauthn\/browser['"]/m);
    } finally {
      rmSync(outDir, { recursive: true, force: true });
    }
  }, 60_000);
});
