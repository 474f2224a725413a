import { parseArgs, type ParseArgsConfig } from "node:util";
import type { StreamLimits } from "@channelkit/core";
import { UsageError } from "./errors.js";

type Options = NonNullable<ParseArgsConfig["options"]>;

/** What {@link parse} returns, spelled out: the shipped declarations cannot name node:util's own types. */
type Parsed<O extends Options> = ReturnType<
  typeof parseArgs<{ args: string[]; options: { db: { type: "string" }; config: { type: "string" } } & O; allowPositionals: boolean; strict: true }>
>;

/** Parses a command's arguments strictly: an unknown option is a usage error, not ignored. Every command takes `--db` and `--config`. */
export function parse<O extends Options>(args: string[], options: O, positionals = 0, what = "the channel ID"): Parsed<O> {
  let parsed: Parsed<O>;
  try {
    parsed = parseArgs({ args, options: { db: { type: "string" }, config: { type: "string" }, ...options }, allowPositionals: positionals > 0, strict: true });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (parsed.positionals.length !== positionals) {
    throw new UsageError(positionals === 0 ? `Unexpected argument: ${parsed.positionals[0]}` : `Missing argument: ${what}`);
  }
  return parsed;
}

/** A `true`/`false` option value. */
export function booleanValue(name: string, value: string | undefined): boolean | undefined {
  if (value === undefined) return undefined;
  if (value === "true") return true;
  if (value === "false") return false;
  throw new UsageError(`--${name} takes true or false, not "${value}"`);
}

/** A value among `allowed`. */
export function oneOf<T extends string>(name: string, value: string | undefined, allowed: readonly T[]): T | undefined {
  if (value === undefined) return undefined;
  if ((allowed as readonly string[]).includes(value)) return value as T;
  throw new UsageError(`--${name} takes one of ${allowed.join(", ")}, not "${value}"`);
}

/** A required option. */
export function required(name: string, value: string | undefined): string {
  if (value === undefined || value === "") throw new UsageError(`--${name} is required`);
  return value;
}

/** An example of each JSON option, for the message of a value that is not JSON. */
const JSON_EXAMPLES: Record<string, string> = {
  widget: '{"theme":{"position":"bottom-left"}}',
  livechat: '{"wait_timeout_seconds":300}',
  "rate-limits": '{"publishable_key":{"requests":600,"window_seconds":60}}',
};

/** A JSON option (the schema it must match is checked by the operation). */
export function jsonValue(name: string, value: string | undefined): unknown {
  if (value === undefined) return undefined;
  try {
    return JSON.parse(value);
  } catch {
    const example = JSON_EXAMPLES[name];
    throw new UsageError(`--${name} takes JSON${example ? `, e.g. '${example}'` : ""}, not ${JSON.stringify(value)}`);
  }
}

/** An integer option from `min` to `max`. */
export function integerValue(name: string, value: string, min: number, max: number): number {
  const number = /^\d{1,9}$/.test(value) ? Number(value) : Number.NaN;
  if (!(number >= min && number <= max)) throw new UsageError(`--${name} takes an integer from ${min} to ${max}, not "${value}"`);
  return number;
}

/** Rate limits in the wire's names (`--rate-limits`), checked by `schema`: each problem named. */
export function rateLimitsValue<T>(
  name: string,
  value: string,
  schema: { safeParse(value: unknown): { success: true; data: T } | { success: false; error: { issues: { path: PropertyKey[]; message: string }[] } } },
): T {
  const parsed = schema.safeParse(jsonValue(name, value));
  if (!parsed.success) {
    throw new UsageError(
      `--${name}: ${parsed.error.issues.map((issue) => (issue.path.length > 0 ? `${issue.path.join(".")}: ${issue.message}` : issue.message)).join("; ")}`,
    );
  }
  return parsed.data;
}

/** A cap (`--max-connections`, `--streams-per-key`): a whole number from 1, or `off` for none; undefined when not given. */
export function capValue(name: string, value: string | undefined): number | false | undefined {
  if (value === undefined) return undefined;
  if (value === "off") return false;
  const number = /^\d{1,9}$/.test(value) ? Number(value) : Number.NaN;
  if (!(number >= 1)) throw new UsageError(`--${name} takes a whole number from 1 to 999999999, or off for no cap, not "${value}"`);
  return number;
}

/** `--streams-per-key` and `--streams-per-address` as the `streamLimits` option: undefined when neither is given. */
export function streamLimitsValue(perKey: string | undefined, perAddress: string | undefined): StreamLimits | undefined {
  const limits: StreamLimits = {};
  const key = capValue("streams-per-key", perKey);
  const address = capValue("streams-per-address", perAddress);
  if (key !== undefined) limits.perKey = key;
  if (address !== undefined) limits.perAddress = address;
  return key === undefined && address === undefined ? undefined : limits;
}
