/**
 * The `CHANNELKIT_*` variables the command reads: one of another name is a typo that would
 * otherwise go unnoticed (`CHANNELKIT_DATABASE` for `CHANNELKIT_DB` opens `./channelkit.db`).
 */
export const KNOWN_VARIABLES = [
  "CHANNELKIT_DB",
  "CHANNELKIT_SECRET_KEY",
  "CHANNELKIT_SECRET_KEY_FALLBACKS",
  "CHANNELKIT_ADMIN_JWT_SECRET",
  "CHANNELKIT_ADMIN_JWKS_URL",
  "CHANNELKIT_ADMIN_JWT_ISSUER",
  "CHANNELKIT_ADMIN_JWT_AUDIENCE",
  "CHANNELKIT_LIVECHAT_BRIDGE_URL",
  "CHANNELKIT_LIVECHAT_BRIDGE_SECRET",
] as const;

/** Variables of this repository's tests, fuzzing and examples, which a developer's shell may hold: not the command's, not typos. */
const OTHER_TOOLS = /^CHANNELKIT_(TEST|FUZZ|BENCH)_|^CHANNELKIT_D1_DIR$/;

/** The warning for each `CHANNELKIT_*` variable of `env` that the command does not read. */
export function unknownVariableWarnings(env: NodeJS.ProcessEnv): string[] {
  const known = new Set<string>(KNOWN_VARIABLES);
  return Object.keys(env)
    .filter((name) => name.startsWith("CHANNELKIT_") && !known.has(name) && !OTHER_TOOLS.test(name))
    .map((name) => `WARNING: ${name} is not a variable channelkit reads, and is ignored (it reads ${KNOWN_VARIABLES.join(", ")})`);
}
