import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { verificationEmail } from '../../src/modules/mail/mail.templates.js';

/**
 * Facts the docs state that the code decides: the schema version `latchkey migrate` prints, the
 * path of the JWKS, and what `GET /verify-email` is for. Each is read from the repository, so a
 * new migration or a moved route shows up here instead of in a reader's failed copy-and-paste.
 */

const ROOT = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');

/** The number of the newest migration file (`migrations/NNN.do.<name>.sql`). */
function newestMigration(): number {
  const numbers = readdirSync(path.join(ROOT, 'migrations'))
    .map((name) => /^(\d+)\.do\..+\.sql$/.exec(name)?.[1])
    .filter((n): n is string => n !== undefined)
    .map(Number);
  expect(numbers.length).toBeGreaterThan(0);
  return Math.max(...numbers);
}

/**
 * README.md and the docs/ pages a user reads to run and call the service. docs/performance.md is
 * left out: its tables name the benchmark scenarios of past runs, not the interface.
 */
function userDocs(): string[] {
  const docs = readdirSync(path.join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md') && name !== 'performance.md')
    .map((name) => `docs/${name}`);
  return ['README.md', ...docs];
}

describe('docs state what the code does', () => {
  it("docs/operations.md: the sample output of `latchkey migrate` names the newest migration's version, in the words the command prints", () => {
    const newest = newestMigration();
    const text = read('docs/operations.md');
    const sample = /latchkey migrate\n(#[^\n]*)\n/.exec(text)?.[1];
    expect(sample, 'the migrate sample in docs/operations.md').toBeDefined();
    const versions = [...sample!.matchAll(/version (\d+)/g)].map((m) => Number(m[1]));
    expect(versions.length).toBeGreaterThan(0);
    expect(versions, sample).toEqual(versions.map(() => newest));
    // The lines as src/db/migrate.cli.ts writes them.
    expect(sample).toContain(`schema is at version ${newest}.`);
    expect(sample).toContain(`Schema is current (version ${newest}).`);
    const applied = /Applied migrations ([\d, …]+);/.exec(sample!)?.[1];
    expect(applied, sample).toBeDefined();
    expect(applied!.trim().endsWith(String(newest)), applied).toBe(true);
  });

  it('README.md and docs/*.md write the JWKS path under the API prefix (/auth/v0/.well-known/jwks.json), never as a root path', () => {
    const wrong: string[] = [];
    for (const file of userDocs()) {
      read(file)
        .split('\n')
        .forEach((line, i) => {
          // Every path or URL of the JWKS ends in /auth/v0/.well-known/jwks.json (an anchor, #jwks, is no path).
          const paths = [...line.matchAll(/(\S*?)\/\.well-known\/jwks\.json/g)];
          if (paths.some((m) => !/\/auth\/v0$/.test(m[1]!)) || /(?<!\.well-known)\/jwks\.json/.test(line)) {
            wrong.push(`${file}:${i + 1}: ${line.trim().slice(0, 140)}`);
          }
        });
    }
    expect(wrong, wrong.join('\n')).toEqual([]);
  });

  it('no doc calls GET /verify-email a form for links: the verification email carries no link', () => {
    const email = verificationEmail({ username: 'alice', code: '123456', expiresInSeconds: 900 });
    expect(`${email.subject}\n${email.text}`).not.toMatch(/https?:\/\/|verify-email\?|www\./);
    const found: string[] = [];
    for (const file of [...userDocs(), 'src/plugins/openapi.ts', 'src/modules/demo/demo.page.ts']) {
      read(file)
        .split('\n')
        .forEach((line, i) => {
          if (/form for links|for links\b/i.test(line)) found.push(`${file}:${i + 1}: ${line.trim().slice(0, 140)}`);
        });
    }
    expect(found, found.join('\n')).toEqual([]);
  });
});
