import { isServiceError } from "@channelkit/core";
import { USAGE } from "./usage.js";

/**
 * The codes of the command's own refusals, beside the contract's (`validation_error`,
 * `channel_not_found`, ...) that the admin operations answer:
 *
 * - `usage_error`: the command line is wrong (exit code 2, the usage follows the envelope);
 * - `config_error`: the config file cannot be found or loaded, or exports something else than
 *   the service's options;
 * - `environment_error`: a variable the command needs is unset (`CHANNELKIT_ADMIN_JWT_SECRET`
 *   for `admin-token`);
 * - `database_error`: the database cannot be opened or migrated (unreachable, a driver to
 *   install, a URL of a database it does not know, a migration that failed);
 * - `service_error`: the service refuses its options (no master key in production, two flows
 *   of one name, a plugin's start-up that failed);
 * - `address_in_use`: `serve`'s host and port are taken;
 * - `shutdown_timeout`, `shutdown_interrupted`: `serve` stopped without finishing its drain;
 * - `runtime_error`: anything else.
 */
export type CliErrorCode =
  | "usage_error"
  | "config_error"
  | "environment_error"
  | "database_error"
  | "service_error"
  | "address_in_use"
  | "shutdown_timeout"
  | "shutdown_interrupted"
  | "runtime_error";

/** A refusal of the command itself, printed as the envelope `{"error":{"code","message"}}` on stderr. */
export class CliError extends Error {
  override name = "CliError";
  readonly code: CliErrorCode;

  constructor(code: CliErrorCode, message: string, options?: { cause?: unknown }) {
    super(withoutPrefix(message), options);
    this.code = code;
  }
}

/** A mistake in the command line: printed as the envelope with the usage after it, exit code 2. */
export class UsageError extends CliError {
  override name = "UsageError";

  constructor(message: string) {
    super("usage_error", message);
  }
}

/** `message` without the `channelkit: ` prefix the library's own messages start with. */
function withoutPrefix(message: string): string {
  return message.replace(/^(channelkit: )+/, "");
}

/** The message of anything thrown. */
function messageOf(error: unknown): string {
  return withoutPrefix(error instanceof Error ? error.message : String(error));
}

/**
 * Runs `body`; what it throws, other than the command's own refusals and the contract's
 * errors, becomes a {@link CliError} of `code`, its message kept (`database_error` for the
 * opening of a database, ...).
 */
export async function failingAs<T>(code: CliErrorCode, body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (error) {
    if (error instanceof CliError || isServiceError(error)) throw error;
    throw new CliError(code, messageOf(error), { cause: error });
  }
}

/** The envelope of an error: the contract's for a `ServiceError` (with its `details`), else the command's. */
export function errorEnvelope(error: unknown): { error: { code: string; message: string; details?: unknown } } {
  if (isServiceError(error)) {
    return {
      error: error.details === undefined ? { code: error.code, message: error.message } : { code: error.code, message: error.message, details: error.details },
    };
  }
  if (error instanceof CliError) return { error: { code: error.code, message: error.message } };
  return { error: { code: "runtime_error", message: messageOf(error) } };
}

/**
 * Prints `error` on stderr and answers the exit code: the one place where the command writes
 * an error, always as the envelope on one line (then the usage, for a usage error). 2 for a
 * bad command line, 1 for every other refusal.
 */
export function reportError(err: (line: string) => void, error: unknown): number {
  const line = JSON.stringify(errorEnvelope(error));
  if (error instanceof UsageError) {
    err(`${line}\n\n${USAGE}`);
    return 2;
  }
  err(line);
  return 1;
}

/** A warning or a log line for stderr: `message` with the `channelkit: ` prefix exactly once. */
export function logLine(message: string): string {
  return `channelkit: ${withoutPrefix(message)}`;
}
