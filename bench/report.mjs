// Turns the raw results of bench/run.mjs into the results section of docs/performance.md:
// medians over the passes with the spread (min–max), the ratio to the matching reference, and
// whether each target is met. Only the text between the two markers is rewritten;
// the rest of the page (analysis, profile, changes) is written by hand.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { median } from './lib.mjs';

export const BEGIN = '<!-- bench:results:begin (written by npm run bench; edit outside the markers) -->';
export const END = '<!-- bench:results:end -->';

/** The targets at 32 connections, by scenario: the ratio of req/s to the reference (the floor where there is one). */
const RATIO_TARGETS = { me: 0.9, 'me-uncached': 0.9, refresh: 0.8, 'sign-in': 0.85, 'sign-up': 0.8, jwks: 0.5 };
/** p99 latency targets in ms. */
const P99_TARGETS = { me: 10, 'me-uncached': 10 };
/** p99 latency targets as a multiple of the reference's p99 in the same run. */
const P99_RATIO_TARGETS = { refresh: 2 };
const PEAK_RSS_TARGET_MIB = 200;
const START_TARGET_MS = 1000;
const TARGET_CONNECTIONS = 32;

/** `v` with `digits` decimals, or n/a. */
export const fmt = (v, digits = 0) => (v === null || v === undefined || !Number.isFinite(v) ? 'n/a' : v.toFixed(digits));
function spread(values, digits = 0) {
  const xs = values.filter((v) => typeof v === 'number' && Number.isFinite(v));
  if (xs.length === 0) return 'n/a';
  const m = fmt(median(xs), digits);
  if (xs.length === 1) return m;
  return `${m} (${fmt(Math.min(...xs), digits)}–${fmt(Math.max(...xs), digits)})`;
}
const sum = (xs) => xs.reduce((a, b) => a + (b ?? 0), 0);

/** Rows of one table: every (scenario, connections) pair over `passes`. */
function scenarioRows(passes) {
  const keys = [];
  for (const p of passes) for (const r of p.results) if (!keys.some((k) => k.scenario === r.scenario && k.connections === r.connections)) keys.push(r);
  return keys.map(({ scenario, connections, label }) => {
    const rs = passes.flatMap((p) => p.results.filter((r) => r.scenario === scenario && r.connections === connections));
    const ratio = median(rs.map((r) => r.ratio));
    const p99 = median(rs.map((r) => r.service.p99Ms));
    let target = '';
    let met = '';
    if (connections === TARGET_CONNECTIONS && RATIO_TARGETS[scenario] !== undefined) {
      const parts = [`≥ ${RATIO_TARGETS[scenario]}x`];
      let ok = ratio !== null && ratio >= RATIO_TARGETS[scenario];
      if (P99_TARGETS[scenario] !== undefined) {
        parts.push(`p99 ≤ ${P99_TARGETS[scenario]} ms`);
        ok = ok && p99 !== null && p99 <= P99_TARGETS[scenario];
      }
      if (P99_RATIO_TARGETS[scenario] !== undefined) {
        const p99Ratio = median(rs.map((r) => (r.reference.p99Ms > 0 ? r.service.p99Ms / r.reference.p99Ms : null)));
        parts.push(`p99 ≤ ${P99_RATIO_TARGETS[scenario]}x the reference's (${fmt(p99Ratio, 2)}x)`);
        ok = ok && p99Ratio !== null && p99Ratio <= P99_RATIO_TARGETS[scenario];
      }
      target = parts.join(', ');
      met = ok ? 'yes' : '**no**';
    }
    return [
      `${label}`,
      String(connections),
      spread(rs.map((r) => r.service.reqPerSec)),
      spread(rs.map((r) => r.service.p50Ms), 2),
      spread(rs.map((r) => r.service.p99Ms), 2),
      `${sum(rs.map((r) => r.service.non2xx))} / ${sum(rs.map((r) => r.service.errors + (r.service.timeouts ?? 0)))}`,
      rs[0].reference.kind,
      spread(rs.map((r) => r.reference.reqPerSec), rs[0].reference.kind.startsWith('argon2') ? 1 : 0),
      spread(rs.map((r) => r.reference.p99Ms), 2),
      spread(rs.map((r) => r.ratio), 2),
      target,
      met,
    ];
  });
}
/** A Markdown table. */
export function table(header, rows) {
  return [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
}

/**
 * Rows of the CPU table: per scenario and concurrency, the median over the passes of the CPU
 * microseconds each part spent per answered request (bench/lib.mjs cpuSnapshot), for the service
 * and, where it is a server, its reference.
 */
function cpuRows(passes) {
  const keys = [];
  for (const p of passes) for (const r of p.results) if (!keys.some((k) => k.scenario === r.scenario && k.connections === r.connections)) keys.push(r);
  return keys.map(({ scenario, connections, label }) => {
    const rs = passes.flatMap((p) => p.results.filter((r) => r.scenario === scenario && r.connections === connections));
    const part = (side, key) => median(rs.map((r) => r[side].cpuMicrosecondsPerRequest?.[key]));
    const hasReference = rs.some((r) => r.reference.cpuMicrosecondsPerRequest !== undefined);
    const argon2Reference = rs[0].reference.kind.startsWith('argon2');
    return [
      label,
      String(connections),
      ...['mainThread', 'otherThreads', 'postgres', 'loadGenerator', 'other', 'idle', 'total'].map((key) => fmt(part('service', key))),
      argon2Reference ? 'n/a (argon2id alone, in a process of its own)' : hasReference ? `${fmt(part('reference', 'mainThread'))} / ${fmt(part('reference', 'postgres'))} / ${fmt(part('reference', 'total'))}` : 'n/a',
    ];
  });
}

const CPU_HEADER = ['Scenario', 'Conns', 'Service main thread', 'Service other threads', 'PostgreSQL', 'Load generator', 'Rest of the machine', 'Idle', 'Total (2 cores)', 'Reference: main thread / PostgreSQL / total'];

const HEADER = ['Scenario', 'Conns', 'Service req/s', 'p50 ms', 'p99 ms', 'non-2xx / errors', 'Reference', 'Reference req/s', 'Reference p99 ms', 'Ratio', 'Target (32 conns)', 'Met'];

/** The markdown of the results section. */
export function renderResults(report) {
  const { passes, pglite, settings, machine } = report;
  const peakRss = passes.map((p) => p.servicePeakRssMiB);
  const starts = passes.map((p) => p.startToReadyMedianMs);
  const allStarts = passes.flatMap((p) => p.startToReadyMs);
  const maxPeak = Math.max(...peakRss.filter(Number.isFinite));
  const startMedian = median(allStarts);
  const lines = [
    BEGIN,
    '',
    `Measured ${report.generatedAt.slice(0, 16).replace('T', ' ')} UTC on ${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGiB} GiB, Node.js ${machine.node}, PostgreSQL ${machine.postgres}; revision ${report.revision ?? 'unknown'}.`,
    `${passes.length} passes; in each, every scenario is measured for ${settings.seconds} s on the service and ${settings.seconds} s on its reference, after ${settings.warmupSeconds} s of warm-up each, in ${settings.rounds ?? 1} rounds of alternating ${fmt(settings.seconds / (settings.rounds ?? 1), 1)} s slices (the side that goes first alternates). ` +
      `Service settings: DATABASE_POOL_MAX ${settings.service.databasePoolMax}, libuv thread pool ${settings.service.uvThreadpoolSize}` +
      `${settings.service.uvThreadpoolSizeFromEnv === null ? ' (default)' : ''}, argon2id ${settings.service.argon2Concurrency} at a time, m=${settings.service.argon2.memoryCost} KiB t=${settings.service.argon2.timeCost} p=${settings.service.argon2.parallelism}, ` +
      `ACCESS_TOKEN_CACHE_SIZE ${settings.service.accessTokenCacheSize ?? 'unset (no cache)'}, LOG_LEVEL ${settings.service.logLevel}, node ${(settings.service.nodeFlags ?? []).join(' ')} (as npm start)${settings.service.nodeOptions ? `, NODE_OPTIONS ${settings.service.nodeOptions}` : ''}, rate limits ${settings.service.rateLimits}, ${settings.service.sessionRowsAtStart} sessions in the table at the start.`,
    `1-minute load before each pass: ${passes.map((p) => `${p.quiet.after.one}${p.quiet.quiet ? '' : ' (not quiet)'}`).join(', ')}.`,
    '',
    '### PostgreSQL (medians over the passes, min–max in brackets)',
    '',
    table(HEADER, scenarioRows(passes)),
    '',
    '#### CPU per request (microseconds, medians over the passes)',
    '',
    'Where each answered request\'s CPU went while the service was measured, read from /proc before and after each measurement: the service\'s main thread (its event loop), its other threads (libuv\'s pool: argon2id and RS256 signatures; V8\'s helpers), every PostgreSQL process, the load generator (this benchmark, autocannon), the rest of the busy machine (the kernel outside these processes, other programs), and idle time. The total is the two cores\' time divided by the requests answered. The rest is what the machine\'s counters (/proc/stat, sampled at each timer tick) leave over the processes\' own (the scheduler\'s run time), so it is an estimate: when argon2id keeps both cores busy it can come out a few per cent below zero.',
    '',
    table(CPU_HEADER, cpuRows(passes)),
    '',
    table(
      ['Figure', 'Median (min–max)', 'Target', 'Met'],
      [
        ['Peak RSS of the service over a pass (VmHWM), MiB', `${spread(peakRss)}; highest ${fmt(maxPeak)}`, `≤ ${PEAK_RSS_TARGET_MIB}`, maxPeak <= PEAK_RSS_TARGET_MIB ? 'yes' : '**no**'],
        [`Start to ready (spawn to first HTTP answer, migrations current), ms, ${allStarts.length} starts`, `${fmt(startMedian)} (${fmt(Math.min(...allStarts))}–${fmt(Math.max(...allStarts))}); per-pass medians ${starts.map((s) => fmt(s)).join(', ')}`, `≤ ${START_TARGET_MS}`, startMedian !== null && startMedian <= START_TARGET_MS ? 'yes' : '**no**'],
        ['First start on an empty database (migrations applied), ms', fmt(report.firstStartWithMigrationsMs), '', ''],
      ],
    ),
  ];
  if (pglite !== null && pglite !== undefined) {
    lines.push(
      '',
      `### Embedded PGlite (one pass of ${settings.pgliteSeconds} s per side and scenario; no targets)`,
      '',
      `1-minute load before the pass: ${pglite.quiet.after.one}. The primary-key reference reads a PGlite database of its own with as many rows.`,
      '',
      table(HEADER.slice(0, -2), scenarioRows([pglite]).map((r) => r.slice(0, -2))),
      '',
      `Peak RSS ${fmt(pglite.servicePeakRssMiB)} MiB; start to ready ${fmt(pglite.startToReadyMedianMs)} ms (median of ${pglite.startToReadyMs.length}); first start with migrations ${fmt(pglite.firstStartWithMigrationsMs)} ms.`,
    );
  }
  lines.push('', 'Raw numbers of every measurement: [performance.json](performance.json).', '', END, '');
  return lines.join('\n');
}

/**
 * Replaces the section of `file` between the markers `begin` and `end` (by default those of
 * bench/run.mjs's results) with `section` (which carries the markers), or appends it.
 */
export function writeDocs(file, section, { begin: beginMarker = BEGIN, end: endMarker = END } = {}) {
  const text = existsSync(file) ? readFileSync(file, 'utf8') : '# Performance\n\n## Results\n\n';
  const begin = text.indexOf(beginMarker);
  const end = text.indexOf(endMarker);
  const next = begin !== -1 && end > begin ? `${text.slice(0, begin)}${section.trimEnd()}\n${text.slice(end + endMarker.length).replace(/^\n/, '')}` : `${text.trimEnd()}\n\n${section}`;
  writeFileSync(file, next);
}
