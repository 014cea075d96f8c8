// Self time per function and per origin (package, service source file, Node.js internals, V8)
// of a V8 CPU profile (`node --cpu-prof`), used by bench/profile.mjs.
import { existsSync, readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ROOT } from './lib.mjs';

/** Source maps of the bundle's files (dist/service/), by file URL; null where there is none. */
const sourceMaps = new Map();

/**
 * Where a call frame of the esbuild bundle (dist/service/, what `npm start` runs) came from:
 * its source file (a package's file or src/...) through the bundle's source map, so that time
 * is attributed per package as it was before bundling. Other frames are returned unchanged.
 */
function unbundled(callFrame) {
  const { url, lineNumber, columnNumber } = callFrame;
  if (!url.includes('/dist/service/')) return callFrame;
  if (!sourceMaps.has(url)) {
    const file = `${fileURLToPath(url)}.map`;
    sourceMaps.set(url, existsSync(file) ? new SourceMap(JSON.parse(readFileSync(file, 'utf8'))) : null);
  }
  const entry = sourceMaps.get(url)?.findEntry(lineNumber, columnNumber);
  if (entry === undefined || entry.originalSource === undefined) return callFrame;
  const original = entry.originalSource;
  const source = original.startsWith('file:') ? fileURLToPath(original) : path.resolve(path.dirname(fileURLToPath(url)), original);
  return { ...callFrame, url: `file://${source}`, lineNumber: entry.originalLine };
}

/** Where a call frame comes from: a package, a source file of the service, Node.js itself, or V8. */
function origin(url) {
  if (url === '') return 'V8/native';
  if (url.startsWith('node:')) return 'node (internals)';
  // A frame of the bundle that its source map does not map: esbuild's module wrappers.
  if (url.includes('/dist/service/')) return 'esbuild runtime (bundle)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1];
  const src = /\/(?:dist\/)?(src\/.+)\.[jt]s$/.exec(url);
  if (src) return src[1];
  return url.replace(/^file:\/\//, '').replace(`${ROOT}/`, '');
}

/**
 * Self time per function and per origin of the samples in [fromMs, toMs] (relative to the
 * profile's start). Sample times are reconstructed from V8's `timeDeltas`.
 */
export function summarise(profile, fromMs, toMs) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfByFunction = new Map();
  const selfByOrigin = new Map();
  let t = 0;
  let total = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i] ?? 0;
    const ms = t / 1000;
    const dt = (profile.timeDeltas[i + 1] ?? 0) / 1000;
    if (ms < fromMs || ms > toMs) continue;
    const node = byId.get(profile.samples[i]);
    const { functionName, url, lineNumber } = unbundled(node.callFrame);
    const where = origin(url);
    const file = /node_modules\/(.+)$/.exec(url)?.[1] ?? where;
    const name = `${functionName || '(anonymous)'} — ${file}${url === '' ? '' : `:${lineNumber + 1}`}`;
    selfByFunction.set(name, (selfByFunction.get(name) ?? 0) + dt);
    const bucket = ['(idle)', '(program)', '(garbage collector)'].includes(functionName) ? functionName : where;
    selfByOrigin.set(bucket, (selfByOrigin.get(bucket) ?? 0) + dt);
    total += dt;
  }
  const sorted = (m) => [...m.entries()].sort((a, b) => b[1] - a[1]).map(([name, ms]) => ({ name, ms, share: total > 0 ? ms / total : 0 }));
  return { totalMs: total, functions: sorted(selfByFunction), origins: sorted(selfByOrigin) };
}
