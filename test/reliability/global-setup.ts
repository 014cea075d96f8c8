import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Builds `dist/` once before the reliability suite: the shutdown and crash tests spawn the real
 * service (`node dist/src/main.js`), which must be the code under test, not a stale build.
 */
export default function setup(): void {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
  execFileSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
}
