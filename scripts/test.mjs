#!/usr/bin/env node
// `npm test`'s vitest part: the projects of vitest.config.ts, each in a `vitest run --project
// <name>` of its own, two at a time (README, "Tests"): pglite and browser first, and postgres
// (when TEST_DATABASE_URL is set) as soon as one of them is done.
//
// Why not one `vitest run`: the configuration runs a worker's files in one module graph
// (`isolate: false`), which spares each file about 3 s of importing the service and lets a
// worker hand its PGlite database on to its next file, and vitest then runs the projects of one
// invocation one after the other (it must not mix their environments in a worker). The browser
// project is mostly waiting (the client tabs wait minutes for real token expiry), so it runs
// beside a database project instead of after it. Three projects at once were too many for two
// cores: with six test files at a time, tests that time a request or wait for a child process
// failed.
//
// Usage: node scripts/test.mjs [--project <name>]... [vitest arguments, such as file filters]
//   Without --project: pglite and browser, and postgres when TEST_DATABASE_URL is set.
//   Each project's lines are printed whole as they come (vitest names the project on each file's
//   line); a summary of the projects ends the output. Exit status: 0 when every project passed,
//   otherwise 1.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const vitest = path.join(root, 'node_modules', 'vitest', 'vitest.mjs');

const projects = [];
const rest = [];
const args = process.argv.slice(2);
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--project' && i + 1 < args.length) projects.push(args[++i]);
  else if (args[i].startsWith('--project=')) projects.push(args[i].slice('--project='.length));
  else rest.push(args[i]);
}
if (projects.length === 0) {
  projects.push('pglite', 'browser');
  if (process.env.TEST_DATABASE_URL) projects.push('postgres');
}

/** The last lines of vitest's summary ("Test Files", "Tests", "Duration") of each project. */
const SUMMARY = /^\s*(Test Files|Tests|Duration)\s/;
// vitest colours its output only on a terminal; the children's output is a pipe, so ask for
// colour when this process writes to a terminal, as vitest itself would.
const colour = process.stdout.isTTY ? { FORCE_COLOR: '1' } : {};

/**
 * Runs one project to its end, forwarding its output line by line.
 * @returns the project's exit code and its summary lines.
 */
function run(project) {
  return new Promise((resolve) => {
    const started = Date.now();
    const child = spawn(process.execPath, [vitest, 'run', '--project', project, '--passWithNoTests', ...rest], {
      cwd: root,
      env: { ...process.env, ...colour },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const summary = [];
    for (const [stream, out] of [
      [child.stdout, process.stdout],
      [child.stderr, process.stderr],
    ]) {
      createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => {
        if (SUMMARY.test(line.replace(/\u001b\[[0-9;]*m/g, ''))) summary.push(line.trim());
        out.write(`${line}\n`);
      });
    }
    child.on('close', (code, signal) => resolve({ project, code: code ?? 1, signal, seconds: (Date.now() - started) / 1000, summary }));
  });
}

/** Projects running at once. */
const AT_ONCE = 2;
const queue = [...projects];
const results = [];
/** Takes the next project from the queue until none is left; a failed project does not stop the others. */
async function slot() {
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) results.push(await run(next));
}
await Promise.all(Array.from({ length: Math.min(AT_ONCE, projects.length) }, slot));
results.sort((a, b) => projects.indexOf(a.project) - projects.indexOf(b.project));
console.log('\n== vitest projects');
for (const r of results) {
  const status = r.code === 0 ? 'passed' : `FAILED (exit ${r.code}${r.signal ? `, ${r.signal}` : ''})`;
  console.log(`${r.project}: ${status} in ${r.seconds.toFixed(0)} s`);
  for (const line of r.summary) console.log(`  ${line}`);
}
process.exit(results.every((r) => r.code === 0) ? 0 : 1);
