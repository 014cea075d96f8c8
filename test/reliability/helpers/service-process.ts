import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { testPoolMode } from '../../helpers/database.js';

/** The built entry point `npm start` runs (test/reliability/global-setup.ts builds it). */
export const MAIN_JS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../dist/service/main.js');

/** Longest wait for a spawned service to listen: PGlite start-up plus migrations on a busy machine. */
const START_TIMEOUT_MS = 60_000;

/** How a spawned service ended. */
export interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** The real service (`node dist/service/main.js`, what `npm start` runs) in a child process, listening on 127.0.0.1. */
export interface ServiceProcess {
  readonly child: ChildProcess;
  /** `http://127.0.0.1:<port>`, as the service logged it. */
  readonly url: string;
  readonly port: number;
  /** Every JSON line the service wrote to stdout, parsed. */
  readonly logs: Record<string, unknown>[];
  /** stderr, as text. */
  stderr(): string;
  /** Resolves when the process has exited. */
  readonly exited: Promise<Exit>;
}

/**
 * Spawns the service with a clean environment (PATH only, plus `env`), on 127.0.0.1 and a port
 * the system picks (`PORT=0`), and waits until it logs that it listens.
 * @throws when it exits or does not listen within {@link START_TIMEOUT_MS}; the message carries its output.
 */
export async function startService(env: Record<string, string>): Promise<ServiceProcess> {
  const child = spawn(process.execPath, [MAIN_JS], {
    env: {
      PATH: process.env.PATH ?? '',
      HOST: '127.0.0.1',
      PORT: '0',
      LOG_LEVEL: 'info',
      // Behind PgBouncer in transaction mode when the suite runs there (test/helpers/database.ts).
      ...(env.DATABASE_URL === undefined ? {} : { DATABASE_POOL_MODE: testPoolMode() }),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: Record<string, unknown>[] = [];
  let stderr = '';
  let pending = '';
  const exited = new Promise<Exit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const listening = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`service did not listen within ${START_TIMEOUT_MS} ms:\n${stderr}`)), START_TIMEOUT_MS);
    child.stdout!.on('data', (chunk: Buffer) => {
      pending += chunk.toString('utf8');
      let nl: number;
      while ((nl = pending.indexOf('\n')) !== -1) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        try {
          const entry = JSON.parse(line) as Record<string, unknown>;
          logs.push(entry);
          const m = typeof entry.msg === 'string' ? /^Server listening at (http:\/\/127\.0\.0\.1:\d+)$/.exec(entry.msg) : null;
          if (m !== null) {
            clearTimeout(timer);
            resolve(m[1]!);
          }
        } catch {
          /* not JSON */
        }
      }
    });
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    void exited.then((e) => {
      clearTimeout(timer);
      reject(new Error(`service exited (${e.code ?? e.signal}) before listening:\n${stderr}\n${JSON.stringify(logs.slice(-5))}`));
    });
  });
  const url = await listening;
  return { child, url, port: Number(new URL(url).port), logs, stderr: () => stderr, exited };
}

/** Resolves with how the process ended, or rejects after `ms` milliseconds. */
export async function exitWithin(service: ServiceProcess, ms: number): Promise<Exit> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      service.exited,
      new Promise<never>((_resolve, reject) => (timer = setTimeout(() => reject(new Error(`service did not exit within ${ms} ms`)), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Whether a TCP connection to 127.0.0.1:`port` is refused (nothing listens) rather than accepted. */
export function connectionRefused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
  });
}

/** Kills the process if it still runs (afterAll safety net); waits for it to go. */
export async function stopService(service: ServiceProcess | undefined): Promise<void> {
  if (service === undefined || service.child.exitCode !== null || service.child.signalCode !== null) return;
  service.child.kill('SIGKILL');
  await service.exited;
}
