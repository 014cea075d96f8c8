#!/usr/bin/env node
// `npm run demo-client`: rewrites src/modules/demo/latchkey-client.generated.ts, the demo page's
// copy of @latchkey/client, from the package's sources (scripts/demo-client-bundle.mjs). Run it
// after changing packages/client; test/clients/demo-client-bundle.test.ts fails until then.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { demoClientFile } from './demo-client-bundle.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const file = await demoClientFile();
const target = path.join(root, file.path);
if (existsSync(target) && readFileSync(target, 'utf8') === file.text) {
  console.log(`${file.path}: up to date`);
} else {
  writeFileSync(target, file.text);
  console.log(`${file.path}: rewritten from packages/client`);
}
