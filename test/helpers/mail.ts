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
