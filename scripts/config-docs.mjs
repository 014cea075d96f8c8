#!/usr/bin/env node
// `npm run config-docs`: rewrites README.md's "Configuration" table, between its two markers,
// from the declaration of every setting in src/settings.ts. test/unit/config-docs.test.ts fails
// while README.md differs from what this writes.
//
// src/settings.ts is TypeScript: esbuild (already the build's bundler) bundles it into a
// temporary file, which is imported, then removed. Packages are bundled too, so that nothing but
// Node's own modules is left to resolve from there.
import { build } from 'esbuild';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const readmePath = path.join(root, 'README.md');

const tmp = mkdtempSync(path.join(tmpdir(), 'latchkey-config-docs-'));
let settings;
try {
  const outfile = path.join(tmp, 'settings.mjs');
  await build({ entryPoints: [path.join(root, 'src', 'settings.ts')], outfile, bundle: true, platform: 'node', format: 'esm', target: 'node20', logLevel: 'error' });
  settings = await import(pathToFileURL(outfile).href);
} finally {
  rmSync(tmp, { recursive: true, force: true });
}

const before = readFileSync(readmePath, 'utf8');
const after = settings.withConfigurationTable(before);
if (after === before) {
  console.log('README.md: the configuration table is up to date');
} else {
  writeFileSync(readmePath, after);
  console.log('README.md: configuration table rewritten from src/settings.ts');
}
