import type { Logger } from "../context.js";

/** Options of {@link jsonLogger}. */
export interface JsonLoggerOptions {
  /** Where each line goes (default: `console.error`, one line per call). */
  write?: (line: string) => void;
  /** Fields every line carries, e.g. `{ service: "support-bot" }`. */
  base?: Record<string, unknown>;
}

/**
 * A {@link Logger} that writes one JSON object per line, for a log pipeline to read:
 * `{ "time", "level", "msg", ...fields, "err"? }`. The service passes the ids that find what
 * a line is about as a plain object among the details (`request_id`, `run_id`,
 * `channel_id`, `conversation_id`): they become fields of the line. An `Error` becomes
 * `err` (`name`, `message`, `stack`, its `code` when it has one); any other detail is
 * listed in `details`.
 *
 * @example
 * const service = await createChannelService({ storage, flows, logger: jsonLogger() });
 * // {"time":"2026-11-28T17:20:01.123Z","level":"error","msg":"channelkit: flow \"support\" failed","run_id":"…","channel_id":"…","err":{…}}
 */
export function jsonLogger(options: JsonLoggerOptions = {}): Logger {
  const write = options.write ?? ((line: string) => console.error(line));
  const base = options.base ?? {};
  const log = (level: "warn" | "error", message: string, details: unknown[]) => {
    const line: Record<string, unknown> = { time: new Date().toISOString(), level, msg: message, ...base };
    const others: unknown[] = [];
    for (const detail of details) {
      if (detail instanceof Error) line.err = errorFields(detail);
      else if (isFields(detail)) Object.assign(line, detail);
      else others.push(detail);
    }
    if (others.length > 0) line.details = others.map(printable);
    write(JSON.stringify(line));
  };
  return {
    warn: (message, ...details) => log("warn", message, details),
    error: (message, ...details) => log("error", message, details),
  };
}

function isFields(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && Object.getPrototypeOf(value) === Object.prototype;
}

function errorFields(error: Error): Record<string, unknown> {
  const fields: Record<string, unknown> = { name: error.name, message: error.message, stack: error.stack };
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string" || typeof code === "number") fields.code = code;
  if (error.cause instanceof Error) fields.cause = errorFields(error.cause);
  return fields;
}

/** A detail as JSON can hold it (a bigint, a function, a cycle would throw). */
function printable(value: unknown): unknown {
  if (value === null || ["string", "number", "boolean"].includes(typeof value)) return value;
  try {
    return JSON.parse(JSON.stringify(value)) as unknown;
  } catch {
    return String(value);
  }
}
