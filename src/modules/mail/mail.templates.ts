/** "What to send": the verification email for a code (docs/api.md#verification-codes). */
export function verificationEmail(input: { username: string; code: string; expiresInSeconds: number }): { subject: string; text: string } {
  const minutes = Math.max(1, Math.ceil(input.expiresInSeconds / 60));
  return {
    subject: 'Verify your email address',
    text:
      `Hello ${input.username},\n\n` +
      `Your email verification code is ${input.code}.\n` +
      `It expires in ${minutes} minutes. If you did not sign up, ignore this email.\n`,
  };
}
