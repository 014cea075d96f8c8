#!/usr/bin/env node
// Bundles the service's two entry points (src/main.ts for `npm start`, src/cli.ts for the
// `auth-service` command) with esbuild into dist/service/, the files production runs.
//
// Why: on Node.js 20 a start spent about 0.45 s resolving, reading and compiling some 800
// module files (TypeBox's about 200 of them, 0.1 s), and Node.js 20 has no compile cache. The
// bundle took start to ready from about 0.86 s to about 0.62 s (docs/performance.md, change 8).
// `npm run build` still runs tsc first: the type check, and dist/src/ for the benchmark scripts.
//
// Packages that find files next to their own code at run time stay outside the bundle and are
// loaded from node_modules as before: @node-rs/argon2 (a native addon), @electric-sql/pglite
// (its WebAssembly and data files), @fastify/swagger-ui (the Swagger UI files it serves),
// @fastify/swagger (reads its own package.json), pino and pino-pretty (pino starts transports
// from files by path), pg-native (pg's optional native driver, not installed).
import { build } from 'esbuild';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const outdir = path.join(root, 'dist', 'service');

/** Packages loaded from node_modules at run time instead of bundled (see above). */
const EXTERNAL = ['@node-rs/argon2', '@electric-sql/pglite', '@fastify/swagger-ui', '@fastify/swagger', 'pino', 'pino-pretty', 'pg-native'];

// Chunk names carry content hashes: clear the previous build's files first.
rmSync(outdir, { recursive: true, force: true });
await build({
  absWorkingDir: root,
  entryPoints: ['src/main.ts', 'src/cli.ts'],
  outdir,
  bundle: true,
  // The CLI's commands (serve, migrate, keys, outbox, sessions) stay behind their dynamic
  // imports: code shared with main.js goes into chunk files both load.
  splitting: true,
  chunkNames: 'chunks/[name]-[hash]',
  format: 'esm',
  platform: 'node',
  target: 'node20',
  external: EXTERNAL,
  // Not minified: stack traces in logs keep readable function names. Source maps for
  // NODE_OPTIONS=--enable-source-maps.
  sourcemap: true,
  legalComments: 'linked',
  // The bundled CommonJS packages call require() for Node.js built-ins and external packages.
  banner: { js: "import { createRequire as __bundleCreateRequire } from 'node:module';\nconst require = __bundleCreateRequire(import.meta.url);" },
  logLevel: 'warning',
});
