#!/usr/bin/env node
// Bundles the service's two entry points (src/main.ts for `npm start`, src/cli.ts for the
// `latchkey` command) with esbuild into dist/service/, the files production runs.
//
// Why: on Node.js 20 a start spent about 0.45 s resolving, reading and compiling some 800
// module files (TypeBox's about 200 of them, 0.1 s), and Node.js 20 has no compile cache. The
// bundle took start to ready from about 0.86 s to about 0.62 s (docs/performance.md, change 8).
// `npm run build` still runs tsc first: the type check, and dist/src/ for the benchmark scripts.
//
// One self-contained file per entry point, no shared chunks: a running process reads nothing
// from dist/ after its start, so a rebuild under it (`npm run migrate` rebuilds first) cannot
// take away a file it has yet to load. Our own modules that the code imports on first use (the
// CLI's commands, src/db/pglite.ts) are inlined and evaluated only when imported.
//
// Packages stay outside the bundle, loaded from node_modules as before, when
// - they find files next to their own code at run time: @node-rs/argon2 (a native addon),
//   @electric-sql/pglite (its WebAssembly and data files), @fastify/swagger-ui (the Swagger UI
//   files it serves), @fastify/swagger (reads its own package.json), pino (starts transports
//   from files by path); pg-native is pg's optional native driver;
// - or the service loads them on first use (LAZY below), with import(), or for pino-pretty
//   with createRequire (which esbuild does not follow): inlined, they would be parsed on every
//   start (zxcvbn's dictionaries and nodemailer are about 1 MB of code).
//
// The files are written beside their final names and renamed into place, each replacing the
// old one at once: a process starting while the build runs loads either the old bundle or the
// new one, never a missing or half-written file.
import { build } from 'esbuild';
import { mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const outdir = path.join(root, 'dist', 'service');

/**
 * Packages the service imports only when first needed (docs/decisions.md, "Running the
 * process"): PGlite without DATABASE_URL, pino-pretty on a terminal, nodemailer at the first
 * email, zxcvbn at the first password check, qrcode at the demo page's first QR code.
 */
const LAZY = ['@electric-sql/pglite', 'pino-pretty', 'nodemailer', '@zxcvbn-ts/core', '@zxcvbn-ts/language-common', 'qrcode'];
/** Packages loaded from node_modules at run time instead of bundled (see above). */
const EXTERNAL = ['@node-rs/argon2', '@fastify/swagger-ui', '@fastify/swagger', 'pino', 'pg-native', ...LAZY];

const { metafile, outputFiles } = await build({
  absWorkingDir: root,
  write: false,
  entryPoints: ['src/main.ts', 'src/cli.ts'],
  outdir,
  bundle: true,
  splitting: false,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  external: EXTERNAL,
  // Not minified: stack traces in logs keep readable function names. Source maps for
  // NODE_OPTIONS=--enable-source-maps and for bench/cpu-profile.mjs.
  sourcemap: true,
  legalComments: 'linked',
  // The bundled CommonJS packages call require() for Node.js built-ins and external packages.
  banner: { js: "import { createRequire as __bundleCreateRequire } from 'node:module';\nconst require = __bundleCreateRequire(import.meta.url);" },
  metafile: true,
  logLevel: 'warning',
});

// An inlined module's top-level import of an external package becomes a top-level import of
// the whole file: a static import of a LAZY package anywhere would load it on every start.
for (const [file, output] of Object.entries(metafile.outputs)) {
  const eager = output.imports.filter((i) => i.external && i.kind !== 'dynamic-import' && LAZY.some((p) => i.path === p || i.path.startsWith(`${p}/`)));
  if (eager.length > 0) {
    console.error(`${file} imports ${eager.map((i) => i.path).join(', ')} at load; import them with import() where first needed`);
    process.exit(1);
  }
}

mkdirSync(outdir, { recursive: true });
const written = new Set();
for (const file of outputFiles) {
  const temporary = `${file.path}.${process.pid}.tmp`;
  // An entry point with a shebang (the CLI, package.json's bin) is written executable.
  const executable = file.contents[0] === 0x23 && file.contents[1] === 0x21; // '#!'
  writeFileSync(temporary, file.contents, { mode: executable ? 0o755 : 0o644 });
  renameSync(temporary, file.path);
  written.add(path.basename(file.path));
}
// Files of an earlier build that this one no longer writes (a renamed entry point, say).
for (const name of readdirSync(outdir)) if (!written.has(name)) rmSync(path.join(outdir, name), { recursive: true, force: true });

// Last: the build is complete. scripts/ensure-build.mjs compares this stamp with the sources.
writeFileSync(path.join(outdir, '..', '.build-stamp'), `${new Date().toISOString()}\n`);
