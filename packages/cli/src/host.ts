import {
  type AdminAuthOptions,
  adminApi,
  type ChannelPlugin,
  type ChannelService,
  type ChannelServiceOptions,
  type AccessLogEntry,
  createChannelService,
  jsonLogger,
  type LiveChatProvider,
  type Logger,
  liveChatInbox,
  type MigrateOptions,
  liveChatWebhookBridge,
  type RetentionOptions,
  type ServiceRateLimits,
  type Storage,
  type StreamLimits,
  type TrustProxy,
} from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { type ChannelkitConfig, type ConfigFile, findConfig, loadConfig } from "./config.js";
import { failingAs, logLine, UsageError } from "./errors.js";
import { openStorage, resolveDb } from "./storage.js";
import type { PostgresOptions } from "@channelkit/kysely";

/** Where a command writes; tests pass their own. */
export interface Io {
  env: NodeJS.ProcessEnv;
  /** Where the config file is looked for and `--config` is relative to (default: the process's working directory). */
  cwd?: string;
  out(line: string): void;
  err(line: string): void;
}

/** The options every command takes: where the service comes from. */
export interface HostFlags {
  db?: string | undefined;
  config?: string | undefined;
  /** `serve`'s `--pg-*` flags: the pool of a Postgres `--db`. */
  postgres?: PostgresOptions | undefined;
}

/** Where `serve` sends handovers: the inbox (the default), a help desk through the webhook bridge, or nowhere. */
export type LiveChatChoice = "inbox" | "bridge" | "off";

/** What `serve` adds to the service: its flags, and the plugins of the command. */
export interface Serving {
  /** `--turn-lease-ms`, `--rate-limits`, `--trust-proxy`: undefined when not given (the config's, else the defaults). */
  turnLeaseMs: number | undefined;
  rateLimits: Partial<ServiceRateLimits> | false | undefined;
  trustProxy: TrustProxy | undefined;
  /** `--streams-per-key`, `--streams-per-address`: each replaces the config's cap, the other kept. */
  streamLimits?: StreamLimits | undefined;
  adminDevMode: boolean;
  /** `--livechat`, undefined when not given. */
  livechat: LiveChatChoice | undefined;
  /** The command's own plugins (the widget's script, the demo page); one a config already has, by name, is left out. */
  plugins: ChannelPlugin[];
  /** `--log-format`: `json` writes the service's log as one JSON object per line (`jsonLogger`). */
  logFormat?: "json" | "pretty" | undefined;
  /** `--access-log`: a line per request on stdout, in the `--log-format`. */
  accessLog?: boolean;
  /** `--retention-interval-ms`: the retention sweep's period, or `false` (off); undefined when not given. */
  retention?: RetentionOptions | false | undefined;
}

/** The service a command works on. */
export interface Host {
  service: ChannelService;
  /** The config file it came from, or null for the demo flows. */
  config: ConfigFile | null;
  /** The `--db` value the command opened, or null when the storage is the config's. */
  db: string | null;
  /** The service's flows, by name. */
  flows: string[];
  /** The service's `basePath` ("" for none). */
  basePath: string;
}

/** Admin token verification from the environment (docs/security.md); `development` from `serve --admin-dev-mode`. */
function adminOptions(env: NodeJS.ProcessEnv, development: boolean): AdminAuthOptions {
  const list = (value: string | undefined) => {
    const items = value
      ?.split(",")
      .map((item) => item.trim())
      .filter(Boolean);
    return items && items.length > 1 ? items : items?.[0];
  };
  const options: AdminAuthOptions = {};
  if (env.CHANNELKIT_ADMIN_JWT_SECRET) options.secret = env.CHANNELKIT_ADMIN_JWT_SECRET;
  if (env.CHANNELKIT_ADMIN_JWKS_URL) options.jwksUrl = env.CHANNELKIT_ADMIN_JWKS_URL;
  const issuer = list(env.CHANNELKIT_ADMIN_JWT_ISSUER);
  if (issuer !== undefined) options.issuer = issuer;
  const audience = list(env.CHANNELKIT_ADMIN_JWT_AUDIENCE);
  if (audience !== undefined) options.audience = audience;
  if (development) options.development = true;
  return options;
}

/**
 * The live-chat provider of `serve`: the inbox, whose agent routes take the admin routes'
 * tokens; the webhook bridge to `CHANNELKIT_LIVECHAT_BRIDGE_URL`, signed with
 * `CHANNELKIT_LIVECHAT_BRIDGE_SECRET`; or none with `off` (a handover is then
 * `livechat_unavailable`).
 */
function liveChatProvider(choice: LiveChatChoice, admin: AdminAuthOptions, env: NodeJS.ProcessEnv): LiveChatProvider | undefined {
  if (choice === "inbox") return liveChatInbox(admin);
  if (choice === "off") return undefined;
  const url = env.CHANNELKIT_LIVECHAT_BRIDGE_URL;
  const secret = env.CHANNELKIT_LIVECHAT_BRIDGE_SECRET;
  if (!url || !secret) throw new UsageError("--livechat bridge needs CHANNELKIT_LIVECHAT_BRIDGE_URL and CHANNELKIT_LIVECHAT_BRIDGE_SECRET");
  return liveChatWebhookBridge({ url, secret });
}

/** Migrates a storage the config made, with the tables of `plugins` (the command's own is migrated as it opens). */
async function migrated(storage: Storage, plugins: MigrateOptions["plugins"]): Promise<Storage> {
  try {
    await storage.migrate({ plugins });
  } catch (error) {
    await storage.close().catch(() => undefined);
    throw error;
  }
  return storage;
}

/** A command's storage, migrated, with the config it came from. */
export interface HostStorage {
  storage: Storage;
  file: ConfigFile | null;
  config: ChannelkitConfig | null;
  /** The `--db` value opened, or null when the storage is the config's. */
  db: string | null;
}

/**
 * Opens and migrates the storage a command works on: the config file's (`--config`, else
 * `channelkit.config.*` in the working directory), else `--db`, `$CHANNELKIT_DB` or
 * `./channelkit.db` (also when the config has no storage). The tables of the config's plugins
 * (`ChannelPlugin.schema`: its channels, live chat and plugins) are migrated with channelkit's.
 */
export async function openHostStorage(flags: HostFlags, io: Io): Promise<HostStorage> {
  const file = findConfig(flags.config, io.cwd ?? process.cwd());
  const config: ChannelkitConfig | null = file ? await loadConfig(file) : null;
  if (config?.storage && flags.db !== undefined) {
    throw new UsageError(`--db cannot be used with ${file?.shown}: the storage is the config's (leave storage out of the config to take --db)`);
  }
  const db = config?.storage ? null : resolveDb(flags.db, io.env);
  const postgresFlags = flags.postgres !== undefined && Object.keys(flags.postgres).length > 0;
  if (postgresFlags && config?.storage)
    throw new UsageError(`--pg-* flags cannot be used with ${file?.shown}: its storage is its own (set the pool's options in postgres())`);
  if (postgresFlags && !/^postgres(ql)?:\/\//i.test(db ?? "")) throw new UsageError("--pg-* flags are for a Postgres --db (postgres:// URL)");
  const plugins = [...(config?.channels ?? []), ...(config?.livechat ? [config.livechat] : []), ...(config?.plugins ?? [])];
  const storage = await failingAs("database_error", () =>
    config?.storage ? migrated(config.storage, plugins) : openStorage(db as string, plugins, flags.postgres),
  );
  return { storage, file, config, db };
}

/**
 * Opens the service a command works on ({@link openHostStorage}): the config's options and
 * flows, else the demo flows. For `serve`, the admin routes, the live-chat provider and the
 * command's plugins are added where the config has none of its own, and the flags replace
 * the config's options they name.
 */
export async function openHost(flags: HostFlags, io: Io, serving?: Serving): Promise<Host> {
  const { storage, file, config, db } = await openHostStorage(flags, io);
  try {
    if (config?.livechat && serving?.livechat !== undefined) {
      throw new UsageError(`--livechat cannot be used with ${file?.shown}: it sets livechat`);
    }
    if (config?.logger && serving?.logFormat !== undefined) {
      throw new UsageError(`--log-format cannot be used with ${file?.shown}: it sets logger`);
    }
    if (config?.accessLog && serving?.accessLog) throw new UsageError(`--access-log cannot be used with ${file?.shown}: it sets accessLog`);
    const json = serving?.logFormat === "json";
    const accessLog = serving?.accessLog ? (entry: AccessLogEntry) => io.out(json ? JSON.stringify(entry) : accessLine(entry)) : undefined;
    const pretty: Logger = { warn: (m) => io.err(logLine(m)), error: (m, ...d) => io.err([logLine(m), ...d.map(String)].join(" ")) };
    const options: ChannelServiceOptions = {
      ...config,
      storage,
      flows: config?.flows ?? demoFlows,
      secretKey: config?.secretKey ?? io.env.CHANNELKIT_SECRET_KEY,
      secretKeyFallbacks: config?.secretKeyFallbacks ?? keyList(io.env.CHANNELKIT_SECRET_KEY_FALLBACKS),
      logger: config?.logger ?? (json ? jsonLogger({ write: (line) => io.err(line) }) : pretty),
      ...(accessLog ? { accessLog } : {}),
      // The commands other than serve answer no request: the config's plugins and live chat
      // (whose start-up may reach other services) are serve's alone. Their channel types are
      // registered all the same, without their routes, hooks or start-up: `channel create
      // --type telegram` checks its settings as the server would.
      plugins: channelTypesOf(config?.plugins ?? []),
      livechat: undefined,
      // A command that ends once it printed sweeps nothing on a schedule (`conversation sweep` sweeps at once).
      retention: false,
    };
    if (serving) {
      // One options object for the admin routes and the inbox: they verify the same tokens.
      const admin = adminOptions(io.env, serving.adminDevMode);
      const own = config?.plugins ?? [];
      const ids = new Set(own.map((plugin) => plugin.id));
      options.plugins = [...own, ...[adminApi(admin), ...serving.plugins].filter((plugin) => !ids.has(plugin.id))];
      options.livechat = config?.livechat ?? liveChatProvider(serving.livechat ?? "inbox", admin, io.env);
      if (serving.turnLeaseMs !== undefined) options.turnLeaseMs = serving.turnLeaseMs;
      options.retention = serving.retention ?? config?.retention;
      if (serving.rateLimits !== undefined) options.rateLimits = serving.rateLimits;
      if (serving.trustProxy !== undefined) options.trustProxy = serving.trustProxy;
      if (serving.streamLimits !== undefined) options.streamLimits = { ...(options.streamLimits || {}), ...serving.streamLimits };
    }
    const service = await failingAs("service_error", () => createChannelService(options));
    return { service, config: file, db, flows: options.flows.map((flow) => flow.name), basePath: (options.basePath ?? "").replace(/\/+$/, "") };
  } catch (error) {
    await storage.close().catch(() => undefined);
    throw error;
  }
}

/** A comma-separated list of master keys, as CHANNELKIT_SECRET_KEY_FALLBACKS holds them. */
function keyList(value: string | undefined): string[] {
  return (value ?? "")
    .split(",")
    .map((key) => key.trim())
    .filter((key) => key !== "");
}

/**
 * The channel types of `plugins`, each as a plugin of its own id holding nothing else: what the
 * commands other than serve register of the config's plugins.
 */
function channelTypesOf(plugins: readonly ChannelPlugin[]): ChannelPlugin[] {
  return plugins.flatMap((plugin) => (plugin.channelTypes?.length ? [{ id: plugin.id, channelTypes: plugin.channelTypes }] : []));
}

/** Why a flow is unknown, when the command runs without a config: it knows the demo flows only. */
export function demoFlowsHint(host: Pick<Host, "config">, io: Io): string {
  if (host.config) return "";
  return ` No config file was found in ${io.cwd ?? process.cwd()}, so the command knows the demo flows only: put your service's options (storage, flows) in channelkit.config.ts there, or pass --config PATH (docs/cli.md#your-services-config).`;
}

/** An access log entry as a line for a person: `POST /public/v1/api/execute 200 12.3 ms <request id> <client>`. */
function accessLine(entry: AccessLogEntry): string {
  return `${entry.time} ${entry.method} ${entry.path} ${entry.status} ${entry.duration_ms} ms ${entry.request_id}${entry.client_address ? ` ${entry.client_address}` : ""}`;
}
