/**
 * Polls `check` every 50 ms until it holds.
 * @throws after `ms` milliseconds, naming `what` was awaited.
 */
export async function waitUntil(what: string, ms: number, check: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
