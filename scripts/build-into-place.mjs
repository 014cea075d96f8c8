// Shared by the packages' build scripts (packages/*/scripts/build.mjs): fills a folder beside
// dist/ and renames its entries into dist/ one by one, so a process reading dist/ while a build
// runs reads either the old file or the new one, never a half-written one; entries an earlier
// build wrote and this one did not are removed.
import { mkdirSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';

/**
 * Builds `packageDir`/dist: `fill(staging)` writes the new files into `staging`, an empty folder
 * beside dist/ (`.dist-<pid>`, git-ignored, removed afterwards whatever happens); then they
 * replace dist/'s. A folder replaces its old copy whole (a rename cannot replace a non-empty one).
 * @param {string} packageDir the package's folder.
 * @param {(staging: string) => void | Promise<void>} fill throws to fail the build.
 */
export async function buildIntoPlace(packageDir, fill) {
  const dist = path.join(packageDir, 'dist');
  const staging = path.join(packageDir, `.dist-${process.pid}`);
  rmSync(staging, { recursive: true, force: true });
  try {
    mkdirSync(staging, { recursive: true });
    await fill(staging);
    mkdirSync(dist, { recursive: true });
    const built = new Set(readdirSync(staging));
    for (const name of built) {
      const target = path.join(dist, name);
      if (statSync(path.join(staging, name)).isDirectory()) rmSync(target, { recursive: true, force: true });
      renameSync(path.join(staging, name), target);
    }
    for (const name of readdirSync(dist)) if (!built.has(name)) rmSync(path.join(dist, name), { recursive: true, force: true });
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}
