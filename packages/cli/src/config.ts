import { existsSync, statSync } from "node:fs";
import { extname, isAbsolute, join, relative, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { ChannelServiceOptions, Storage } from "@channelkit/core";
import { CliError } from "./errors.js";

/**
 * What a config file exports: the options of `createChannelService` (`storage`, `flows`,
 * `plugins`, `livechat`, `secretKey`, ...), the storage optional (without it the command
 * opens `--db`, `$CHANNELKIT_DB` or `./channelkit.db`).
 */
export type ChannelkitConfig = Omit<ChannelServiceOptions, "storage"> & {
  /** Your service's storage, e.g. `postgres(process.env.DATABASE_URL)`; the command migrates and closes it. */
  storage?: Storage;
};

/** The default export of a config file: the options, or a function (maybe async) making them. */
export type ChannelkitConfigExport = ChannelkitConfig | Promise<ChannelkitConfig> | (() => ChannelkitConfig | Promise<ChannelkitConfig>);

/** `T` with every key that is not an option of the service typed `never`: a typo is a type error. */
type OnlyOptions<T> = T & { [K in Exclude<keyof T, keyof ChannelkitConfig>]: never };

/**
 * Types a config file's default export (and does nothing else): the options your server
 * passes to `createChannelService`, so that `channelkit channel create --flow support` knows
 * your flows and `channelkit serve` serves your service. Answers its argument, with its own
 * type: import it in your server and pass it to `createChannelService`.
 *
 * @example
 * // channelkit.config.ts
 * import { defineConfig } from "@channelkit/cli";
 * import { postgres } from "@channelkit/kysely";
 * import { support } from "./src/flows.js";
 *
 * export default defineConfig({
 *   storage: postgres(process.env.DATABASE_URL!),
 *   flows: [support],
 *   secretKey: process.env.CHANNELKIT_SECRET_KEY,
 * });
 */
export function defineConfig<T extends ChannelkitConfig>(config: OnlyOptions<T>): T;
/** A function (maybe async) making the options, or a promise of them: called or awaited by the command. */
export function defineConfig<F extends Promise<ChannelkitConfig> | (() => ChannelkitConfig | Promise<ChannelkitConfig>)>(config: F): F;
export function defineConfig(config: ChannelkitConfigExport): ChannelkitConfigExport {
  return config;
}

/** The names a config file is found by in the working directory, without `--config`. */
export const CONFIG_FILES = ["channelkit.config.ts", "channelkit.config.mts", "channelkit.config.mjs", "channelkit.config.js"] as const;

/**
 * Every option a config may set: a key not here is a typo the command refuses. Typed so that
 * an option added to `createChannelService` fails the build until it is listed here.
 */
const OPTIONS = {
  storage: true,
  flows: true,
  secretKey: true,
  secretKeyFallbacks: true,
  production: true,
  livechat: true,
  channels: true,
  plugins: true,
  basePath: true,
  maxBodyBytes: true,
  historyLimit: true,
  estimateTokens: true,
  logger: true,
  turnLeaseMs: true,
  turnPollMaxMs: true,
  turnWaitTimeoutMs: true,
  rateLimits: true,
  trustProxy: true,
  streamLimits: true,
  openapi: true,
  health: true,
  accessLog: true,
  retention: true,
} satisfies Record<keyof ChannelkitConfig, true>;

/** The methods of a storage the command calls (a storage object without one of them is refused by name). */
const STORAGE_METHODS = [
  "migrate",
  "close",
  "createTenant",
  "findTenant",
  "countTenants",
  "listTenants",
  "createChannel",
  "findChannel",
  "listChannels",
  "updateChannel",
  "replaceChannelKey",
  "appendAuditEvent",
  "listAuditEvents",
] as const;

/** A config file to load: where it is, and how messages name it. */
export interface ConfigFile {
  path: string;
  /** As the user would write it: relative to the working directory when inside it. */
  shown: string;
}

/**
 * The config file of a command: `--config PATH` (which must exist), else the one
 * `channelkit.config.{ts,mts,mjs,js}` of the working directory, else none (the demo).
 */
export function findConfig(flag: string | undefined, cwd: string): ConfigFile | null {
  const shown = (path: string) => {
    const inside = relative(cwd, path);
    return inside && !inside.startsWith("..") && !isAbsolute(inside) ? inside : path;
  };
  if (flag !== undefined) {
    const path = resolve(cwd, flag);
    if (!existsSync(path) || !statSync(path).isFile()) throw new CliError("config_error", `--config ${flag}: no such file (looked for ${path})`);
    return { path, shown: shown(path) };
  }
  const found = CONFIG_FILES.filter((name) => existsSync(join(cwd, name)));
  if (found.length > 1) {
    throw new CliError("config_error", `${found.join(" and ")} are both in ${cwd}: keep one, or pick one with --config`);
  }
  const [name] = found;
  return name ? { path: join(cwd, name), shown: name } : null;
}

/** Imports the file: TypeScript through jiti (Node 20 cannot load it), JavaScript as Node loads it. */
async function importConfig(path: string): Promise<Record<string, unknown>> {
  if ([".ts", ".mts", ".cts", ".tsx"].includes(extname(path))) {
    const { createJiti } = await import("jiti");
    return (await createJiti(import.meta.url, { interopDefault: false }).import(path)) as Record<string, unknown>;
  }
  return (await import(pathToFileURL(path).href)) as Record<string, unknown>;
}

/** A value as a message names it: `a string`, `an array`, `null`, ... */
function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  const type = typeof value;
  return type === "object" ? "an object" : `${/^[aeiou]/.test(type) ? "an" : "a"} ${type}`;
}

/**
 * Loads a config file and checks what it exports: the service's options, or a function or a
 * promise of them. Every problem is a `config_error` naming the file and what is wrong.
 */
export async function loadConfig(file: ConfigFile): Promise<ChannelkitConfig> {
  const fail = (problem: string): never => {
    throw new CliError("config_error", `${file.shown}: ${problem}`);
  };
  let module: Record<string, unknown>;
  try {
    module = await importConfig(file.path);
  } catch (error) {
    return fail(`could not be loaded: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (module.default === undefined) {
    return fail(
      "has no default export: export the options of createChannelService, e.g. `export default defineConfig({ storage, flows: [support] })` (defineConfig from @channelkit/cli)",
    );
  }
  let value: unknown = module.default;
  try {
    if (typeof value === "function") value = await (value as () => unknown)();
    else value = await value;
  } catch (error) {
    return fail(`its default export failed: ${error instanceof Error ? error.message : String(error)}`);
  }
  return checkConfig(value, fail);
}

/** Checks the options a config exports, as far as the command needs them; `createChannelService` checks the rest. */
function checkConfig(value: unknown, fail: (problem: string) => never): ChannelkitConfig {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return fail(`exports ${describe(value)}, not the options of createChannelService ({ storage, flows, plugins, ... })`);
  }
  const options = value as Record<string, unknown>;
  if (typeof options.handler === "function" && typeof options.admin === "object") {
    return fail("exports a channel service: export the options you pass to createChannelService instead (the command creates the service itself)");
  }
  const unknown = Object.keys(options).filter((key) => !Object.hasOwn(OPTIONS, key));
  if (unknown.length > 0) {
    return fail(
      `unknown option${unknown.length > 1 ? "s" : ""} ${unknown.map((key) => `"${key}"`).join(", ")} (the options: ${Object.keys(OPTIONS).join(", ")})`,
    );
  }
  const { flows, storage, plugins, livechat } = options;
  if (flows === undefined) return fail("flows is missing: the flows channels can be bound to, e.g. `flows: [support]`");
  if (!Array.isArray(flows)) return fail(`flows must be an array of flows (defineFlow(...)), not ${describe(flows)}`);
  if (flows.length === 0) return fail("flows is empty: give the flows channels can be bound to, e.g. `flows: [support]`");
  flows.forEach((flow: unknown, index) => {
    const { name, run } = (typeof flow === "object" && flow !== null ? flow : {}) as { name?: unknown; run?: unknown };
    if (typeof name !== "string" || name === "" || typeof run !== "function") {
      fail(`flows[${index}] is not a flow: a flow has a name and a run function (defineFlow({ name, run }))`);
    }
  });
  if (storage !== undefined) {
    if (typeof storage !== "object" || storage === null)
      return fail(`storage must be a storage, e.g. sqlite("./app.db") from @channelkit/kysely, not ${describe(storage)}`);
    const missing = STORAGE_METHODS.filter((method) => typeof (storage as Record<string, unknown>)[method] !== "function");
    if (missing.length > 0) {
      return fail(
        `storage is not a channelkit Storage: it has no ${missing.map((method) => `${method}()`).join(", ")} (made for another version of @channelkit/core?)`,
      );
    }
  }
  if (plugins !== undefined && !Array.isArray(plugins)) return fail(`plugins must be an array of plugins, not ${describe(plugins)}`);
  if (livechat !== undefined && (typeof livechat !== "object" || livechat === null)) {
    return fail(`livechat must be a live-chat provider, e.g. liveChatInbox(), not ${describe(livechat)}`);
  }
  return options as ChannelkitConfig;
}
