// Builds dist/ only when it is missing or older than what it is built from, so that `npm start`
// and `npm run migrate` start at once when nothing changed (docs/operations.md, "Building").
// Run by `prepare` (after `npm ci` / `npm install`), `prestart` and `premigrate`.
//
// What a build reads: src/, scripts/bundle.mjs, the tsconfig files, package.json and
// package-lock.json (a dependency that changed is bundled anew). The build (scripts/bundle.mjs)
// writes dist/.build-stamp last; a build newer than every input is current.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const STAMP = path.join(root, 'dist', '.build-stamp');
const INPUT_DIRS = ['src'];
const INPUT_FILES = ['scripts/bundle.mjs', 'tsconfig.json', 'tsconfig.build.json', 'package.json', 'package-lock.json'];
/** What production runs: without these there is nothing to start, whatever the stamp says. */
const OUTPUTS = ['dist/service/main.js', 'dist/service/cli.js'];

/** The newest modification time (ms) of a file or of any file below a folder. */
function newestMtime(target) {
  const stat = statSync(target, { throwIfNoEntry: false });
  if (stat === undefined) return 0;
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = stat.mtimeMs; // a deleted file changes its folder's mtime
  for (const entry of readdirSync(target)) newest = Math.max(newest, newestMtime(path.join(target, entry)));
  return newest;
}

/** Why a build is needed, or undefined when dist/ is current. */
function staleReason() {
  if (OUTPUTS.some((file) => !existsSync(path.join(root, file)))) return 'no build yet';
  const built = statSync(STAMP, { throwIfNoEntry: false })?.mtimeMs;
  if (built === undefined) return 'no build stamp';
  const inputs = Math.max(...[...INPUT_DIRS, ...INPUT_FILES].map((p) => newestMtime(path.join(root, p))));
  return inputs > built ? 'sources changed since the last build' : undefined;
}

const reason = staleReason();
if (reason !== undefined) {
  process.stderr.write(`Building Latchkey (${reason})...\n`);
  const result = spawnSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' });
  if (result.status !== 0) process.exit(result.status ?? 1);
}
