#!/usr/bin/env node
// `npm run openapi`: rewrites docs/openapi.json and docs/admin-openapi.json, the committed copies
// of the OpenAPI documents, from the route schemas (docs/api.md#openapi-document). The documents
// need a built app, so this runs the build (`preopenapi`, scripts/ensure-build.mjs) and uses
// dist/src/openapi-files.js, the same module test/http/openapi.test.ts and
// test/http/admin-docs.test.ts compare the copies with, on an empty in-memory PGlite database.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { migrate } from '../dist/src/db/migrate.js';
import { openPglite } from '../dist/src/db/pglite.js';
import { generateOpenApiFiles } from '../dist/src/openapi-files.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const db = await openPglite(undefined);
let files;
try {
  await migrate(db);
  files = await generateOpenApiFiles(db);
} finally {
  await db.close();
}

for (const file of files) {
  const target = path.join(root, file.path);
  if (existsSync(target) && readFileSync(target, 'utf8') === file.text) {
    console.log(`${file.path}: up to date`);
  } else {
    writeFileSync(target, file.text);
    console.log(`${file.path}: rewritten from the route schemas`);
  }
}
