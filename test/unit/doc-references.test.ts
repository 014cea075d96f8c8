import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The repository stands on its own: its code, tests and docs cite docs/api.md and the other
 * docs/ pages, RFCs, OWASP ASVS or NIST, never a document outside the repository nor the
 * tracker's issue numbers, which a reader of a clone does not have.
 */

const ROOT = path.resolve(import.meta.dirname, '../..');
/**
 * Generated or third-party data, not prose; and the migrations already applied by deployments,
 * which must stay byte for byte as they are (postgrator checks each applied file's checksum and
 * refuses to migrate when one changed).
 */
const SKIPPED = new Set(['package-lock.json', 'docs/performance.json', 'migrations/001.do.initial-schema.sql', 'migrations/002.do.refresh-grace.sql']);
/** Text files worth reading (everything the repository tracks is text except these). */
const BINARY = /\.(png|jpe?g|gif|ico|wasm|gz|tgz|zip|pdf)$/i;

/** What a citation of something outside the repository looks like (built from parts, so this file does not match itself). */
const FORBIDDEN: readonly { what: string; pattern: RegExp }[] = [
  { what: 'a path outside the repository', pattern: new RegExp(['\\.\\.', 'shared'].join('/')) },
  { what: 'the shared specification folder', pattern: new RegExp(['shared', 'spec'].join('/')) },
  { what: 'an issue number', pattern: new RegExp(`\\b${'iss'}ue #?\\d+`, 'i') },
  { what: 'a section of an outside specification', pattern: new RegExp(`\\b${'spe'}c §`, 'i') },
  { what: 'a numbered section of the outside decisions', pattern: new RegExp(`decisions\\.md ${'§'}`) },
  { what: 'the outside extensions document', pattern: new RegExp(`${'extensions'}\\.md`) },
  { what: 'the outside interface document', pattern: new RegExp(`${'interface'}\\.md`) },
];

function trackedTextFiles(): string[] {
  const out = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' });
  return out.split('\n').filter((file) => file !== '' && !SKIPPED.has(file) && !BINARY.test(file));
}

describe('the repository cites nothing outside it', () => {
  it('no file refers to a document outside the repository or to an issue number', () => {
    const files = trackedTextFiles();
    expect(files.length).toBeGreaterThan(50);
    const found: string[] = [];
    for (const file of files) {
      let text: string;
      try {
        text = readFileSync(path.join(ROOT, file), 'utf8');
      } catch {
        continue; // deleted in the working tree
      }
      text.split('\n').forEach((line, i) => {
        for (const { what, pattern } of FORBIDDEN) if (pattern.test(line)) found.push(`${file}:${i + 1}: ${what}: ${line.trim().slice(0, 120)}`);
      });
    }
    expect(found, found.join('\n')).toEqual([]);
  });
});
