import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { buildApp, createLogger } from './app.js';
import { loadConfig } from './config.js';
import type { Db } from './db/db.js';

/**
 * The committed copies of the two OpenAPI documents (docs/api.md#openapi-document,
 * docs/admin-api.md#openapi-document): `npm run openapi` (scripts/openapi.mjs) writes them, and
 * test/http/openapi.test.ts and test/http/admin-docs.test.ts fail while a copy differs from what
 * this module generates. Not part of the service: nothing it serves imports this module.
 */

/** A generated file: its path relative to the repository, and its whole text. */
export interface GeneratedFile {
  readonly path: string;
  readonly text: string;
}

/** The public document's copy. */
export const OPENAPI_FILE = 'docs/openapi.json';
/** The admin API's document's copy. */
export const ADMIN_OPENAPI_FILE = 'docs/admin-openapi.json';

/** A document as its copy holds it: JSON with two-space indentation and a final newline. */
export function openApiFileText(document: unknown): string {
  return `${JSON.stringify(document, null, 2)}\n`;
}

/**
 * Builds the app with the default settings and the admin API on (ADMIN_PORT; the app never
 * listens), reads both documents from it as a client would (`GET /auth/v0/openapi.json`,
 * `GET /admin/v0/openapi.json`), and returns the copies' texts. The documents come from the
 * route schemas alone; the settings only have to turn every route on.
 * @param db an open database whose schema is current; only read at start, and left open.
 * @returns the two files, the public document first.
 * @throws when a document is not served with status 200.
 */
export async function generateOpenApiFiles(db: Db): Promise<GeneratedFile[]> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'latchkey-openapi-'));
  try {
    const config = loadConfig({ DATA_DIR: dataDir, ADMIN_PORT: '0', LOG_LEVEL: 'silent' });
    const app = await buildApp({
      config,
      db,
      logger: createLogger('silent'),
      startOutboxWorker: false,
      startRetentionWorker: false,
      startWebhookWorker: false,
    });
    try {
      await app.ready();
      const documents = [
        { file: OPENAPI_FILE, server: app, url: '/auth/v0/openapi.json' },
        { file: ADMIN_OPENAPI_FILE, server: app.admin!, url: '/admin/v0/openapi.json' },
      ];
      const out: GeneratedFile[] = [];
      for (const { file, server, url } of documents) {
        const res = await server.inject({ method: 'GET', url });
        if (res.statusCode !== 200) throw new Error(`GET ${url} answered ${res.statusCode}: ${res.body}`);
        out.push({ path: file, text: openApiFileText(res.json()) });
      }
      return out;
    } finally {
      await app.close();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}
