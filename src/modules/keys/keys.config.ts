import { codeHmacKeyFileProblem, rsaKeyFileProblem } from './keys.service.js';

/** The key settings as read from the environment (README "Configuration"); undefined: unset. */
export interface KeyFileSettings {
  readonly JWT_PRIVATE_KEY_FILE: string | undefined;
  readonly JWT_PUBLIC_KEY_FILES: readonly string[];
  readonly CODE_HMAC_KEY_FILE: string | undefined;
  readonly MFA_KEY_FILE: string | undefined;
  readonly WEBHOOK_KEY_FILE: string | undefined;
}

/**
 * Every problem with the key files the settings name, one `NAME: problem` line each, for the
 * start-up message that lists all configuration problems at once (`loadConfig`'s ConfigError):
 * JWT_PRIVATE_KEY_FILE and each of JWT_PUBLIC_KEY_FILES must be a readable PEM RSA key of at
 * least 2048 bits (RFC 7518 §3.3, {@link rsaKeyFileProblem}); CODE_HMAC_KEY_FILE, MFA_KEY_FILE
 * and WEBHOOK_KEY_FILE readable files of at least 32 bytes ({@link codeHmacKeyFileProblem}).
 * Unset settings are not checked (keys are then generated into DATA_DIR, or derived).
 * @returns the problems, in the order above; empty when every named file can serve.
 */
export function keyFileProblems(settings: KeyFileSettings): string[] {
  const problems: string[] = [];
  const push = (name: string, problem: string | undefined): void => {
    if (problem !== undefined) problems.push(`${name}: ${problem}`);
  };
  if (settings.JWT_PRIVATE_KEY_FILE !== undefined) push('JWT_PRIVATE_KEY_FILE', rsaKeyFileProblem(settings.JWT_PRIVATE_KEY_FILE, 'private'));
  for (const file of settings.JWT_PUBLIC_KEY_FILES) push('JWT_PUBLIC_KEY_FILES', rsaKeyFileProblem(file, 'public'));
  for (const name of ['CODE_HMAC_KEY_FILE', 'MFA_KEY_FILE', 'WEBHOOK_KEY_FILE'] as const) {
    const file = settings[name];
    if (file !== undefined) push(name, codeHmacKeyFileProblem(file));
  }
  return problems;
}
