import type { TestContext } from './context.js';
import type { ReceivedMail } from './smtp.js';

/** The body of a received message with quoted-printable soft breaks and escapes undone. */
export function mailText(mail: ReceivedMail): string {
  return mail.raw.replace(/=\r?\n/g, '').replace(/=([0-9A-F]{2})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16)));
}

/** Runs the outbox until at least `count` messages to `email` arrived; returns them all. */
export async function mailsTo(ctx: TestContext, email: string, count: number): Promise<ReceivedMail[]> {
  for (let i = 0; i < 100; i++) {
    await ctx.app.outbox.runOnce();
    const mine = ctx.smtp.messages.filter((m) => m.to.includes(email));
    if (mine.length >= count) return mine;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`fewer than ${count} emails to ${email} arrived`);
}

/** The kinds of the security notices queued to `email`, oldest first, with their detail lines. */
export async function noticesTo(ctx: TestContext, email: string): Promise<{ notice: string; details: string[] | null }[]> {
  const { rows } = await ctx.db.query<{ notice: string; details: string[] | null }>(
    "SELECT payload->>'notice' AS notice, payload->'details' AS details FROM email_outbox WHERE recipient = $1 AND kind = 'notice' ORDER BY created_at, id",
    [email],
  );
  return rows;
}
