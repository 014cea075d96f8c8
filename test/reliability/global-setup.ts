import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Builds `dist/` once before the reliability suite (`npm run build`: tsc, then the esbuild
 * bundle in dist/service/): the shutdown and crash tests spawn the real service as `npm start`
 * runs it (`node dist/service/main.js`), which must be the code under test, not a stale build.
 */
export default function setup(): void {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit' });
}
