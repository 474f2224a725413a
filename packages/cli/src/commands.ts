import {
  channelRateLimitsWireSchema,
  serviceRateLimitsWireSchema,
  type ServiceRateLimits,
  type TrustProxy,
  type AdminAuthOptions,
  adminApi,
  type ChannelAdmin,
  type ChannelPlugin,
  type ChannelService,
  createChannelService,
  type LiveChatProvider,
  liveChatInbox,
  liveChatWebhookBridge,
} from "@channelkit/core";
import { widgetAsset } from "@channelkit/widget/plugin";
import { demoFlows } from "@channelkit/core/demo";
import { serve } from "@channelkit/node";
import { booleanValue, integerValue, jsonValue, oneOf, parse, rateLimitsValue, required } from "./args.js";
import { signAdminToken } from "./admin-token.js";
import { type DemoWidget, provisionDemo } from "./demo.js";
import { demoPage } from "./demo-page.js";
import { openStorage, resolveDb } from "./storage.js";
import { errorLine, UsageError } from "./usage.js";

/** Where a command writes; tests pass their own. */
export interface Io {
  env: NodeJS.ProcessEnv;
  out(line: string): void;
  err(line: string): void;
}

const ENVIRONMENTS = ["prod", "dev", "staging"] as const;

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

/** The service every command works through, on the database of `--db`; `serve` mounts the admin routes. */
async function openService(
  db: string | undefined,
  io: Io,
  serving?: {
    turnLeaseMs?: number;
    adminDevMode: boolean;
    livechat: LiveChatChoice;
    plugins: ChannelPlugin[];
    rateLimits: Partial<ServiceRateLimits> | false;
    trustProxy: TrustProxy;
  },
): Promise<ChannelService> {
  const storage = await openStorage(resolveDb(db, io.env));
  // One options object for the admin routes and the inbox: they verify the same tokens.
  const admin = adminOptions(io.env, serving?.adminDevMode ?? false);
  return createChannelService({
    storage,
    turnLeaseMs: serving?.turnLeaseMs,
    ...(serving ? { rateLimits: serving.rateLimits, trustProxy: serving.trustProxy } : {}),
    plugins: serving ? [adminApi(admin), ...serving.plugins] : [],
    livechat: serving ? liveChatProvider(serving.livechat, admin, io.env) : undefined,
    flows: demoFlows,
    secretKey: io.env.CHANNELKIT_SECRET_KEY,
    logger: { warn: (m) => io.err(errorLine(m)), error: (m, ...d) => io.err([errorLine(m), ...d.map(String)].join(" ")) },
  });
}

/** Where `serve` sends handovers: the inbox (the default), a help desk through the webhook bridge, or nowhere. */
type LiveChatChoice = "inbox" | "bridge" | "off";

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

/** Runs `action` with the service's admin, recorded in the audit trail as the actor `cli`. */
async function withService<T>(db: string | undefined, io: Io, action: (admin: ChannelAdmin) => Promise<T>): Promise<T> {
  const service = await openService(db, io);
  try {
    return await action(service.admin.as("cli"));
  } finally {
    await service.close();
  }
}

function printJson(io: Io, value: unknown): void {
  io.out(JSON.stringify(value));
}

function list(value: string | undefined): string[] | undefined {
  return value
    ?.split(",")
    .map((item) => item.trim())
    .filter(Boolean);
}

export async function migrate(args: string[], io: Io): Promise<void> {
  const { values } = parse(args, {});
  const storage = await openStorage(resolveDb(values.db, io.env));
  await storage.close();
  printJson(io, { migrated: true });
}

export async function tenantCreate(args: string[], io: Io): Promise<void> {
  const { values } = parse(args, { name: { type: "string" } });
  const name = required("name", values.name);
  const { tenant } = await withService(values.db, io, (admin) => admin.createTenant({ name }));
  printJson(io, { tenant: { id: tenant.id, name: tenant.name, created_at: tenant.createdAt } });
}

export async function channelCreate(args: string[], io: Io): Promise<void> {
  const { values } = parse(args, {
    tenant: { type: "string" },
    flow: { type: "string" },
    type: { type: "string" },
    environment: { type: "string" },
    mode: { type: "string" },
    "allowed-origin": { type: "string", multiple: true },
    "default-stream": { type: "boolean" },
    "require-signature": { type: "boolean" },
    "resumable-streams": { type: "boolean" },
    languages: { type: "string" },
    name: { type: "string" },
  });
  const input = {
    tenantId: required("tenant", values.tenant),
    flow: required("flow", values.flow),
    type: oneOf("type", values.type, ["api", "webhook"] as const),
    environment: oneOf("environment", values.environment, ENVIRONMENTS),
    mode: oneOf("mode", values.mode, ["server", "public"] as const),
    allowedOrigins: values["allowed-origin"],
    defaultStream: values["default-stream"],
    requireSignature: values["require-signature"],
    resumableStreams: values["resumable-streams"],
    languages: list(values.languages),
    name: values.name,
  };
  printJson(io, await withService(values.db, io, (admin) => admin.createChannel(input)));
}

export async function channelUpdate(args: string[], io: Io): Promise<void> {
  const { values, positionals } = parse(
    args,
    {
      state: { type: "string" },
      environment: { type: "string" },
      "allowed-origin": { type: "string", multiple: true },
      "default-stream": { type: "string" },
      "require-signature": { type: "string" },
      flow: { type: "string" },
      name: { type: "string" },
      languages: { type: "string" },
      widget: { type: "string" },
      livechat: { type: "string" },
      "run-timeout-seconds": { type: "string" },
      "rate-limits": { type: "string" },
      "resumable-streams": { type: "string" },
    },
    1,
  );
  const livechat = liveChatSettings(jsonValue("livechat", values.livechat));
  const patch = {
    state: oneOf("state", values.state, ["active", "inactive", "archived"] as const),
    environment: oneOf("environment", values.environment, ENVIRONMENTS),
    allowedOrigins: values["allowed-origin"],
    defaultStream: booleanValue("default-stream", values["default-stream"]),
    requireSignature: booleanValue("require-signature", values["require-signature"]),
    flow: values.flow,
    name: values.name,
    languages: list(values.languages),
    widget: jsonValue("widget", values.widget),
    runTimeoutSeconds: values["run-timeout-seconds"] === undefined ? undefined : integerValue("run-timeout-seconds", values["run-timeout-seconds"], 1, 86_400),
    rateLimits: values["rate-limits"] === undefined ? undefined : rateLimitsValue("rate-limits", values["rate-limits"], channelRateLimitsWireSchema),
    resumableStreams: booleanValue("resumable-streams", values["resumable-streams"]),
    ...livechat,
  };
  const defined = Object.fromEntries(Object.entries(patch).filter(([, value]) => value !== undefined));
  if (Object.keys(defined).length === 0) throw new UsageError("channel update needs at least one option to change");
  printJson(io, await withService(values.db, io, (admin) => admin.updateChannel(positionals[0] as string, defined)));
}

/**
 * `--livechat '{"status_messages":{...},"wait_timeout_seconds":300}'`, as the admin PATCH
 * takes it, to the admin's names; the admin validates the values.
 */
function liveChatSettings(value: unknown): { livechatMessages?: unknown; livechatWaitTimeoutSeconds?: unknown } {
  if (value === undefined) return {};
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new UsageError("--livechat takes a JSON object");
  const { status_messages, wait_timeout_seconds, ...unknown } = value as Record<string, unknown>;
  const extra = Object.keys(unknown);
  if (extra.length > 0) throw new UsageError(`--livechat takes status_messages and wait_timeout_seconds, not ${extra.join(", ")}`);
  return {
    ...(status_messages === undefined ? {} : { livechatMessages: status_messages }),
    ...(wait_timeout_seconds === undefined ? {} : { livechatWaitTimeoutSeconds: wait_timeout_seconds }),
  };
}

export async function channelRotateKey(args: string[], io: Io): Promise<void> {
  const { values, positionals } = parse(args, {}, 1);
  printJson(io, await withService(values.db, io, (admin) => admin.rotateKey(positionals[0] as string)));
}

export async function channelRotateSigningSecret(args: string[], io: Io): Promise<void> {
  const { values, positionals } = parse(args, {}, 1);
  printJson(io, await withService(values.db, io, (admin) => admin.rotateSigningSecret(positionals[0] as string)));
}

export async function audit(args: string[], io: Io): Promise<void> {
  const { values } = parse(args, { tenant: { type: "string" }, channel: { type: "string" }, limit: { type: "string" }, cursor: { type: "string" } });
  const query = {
    ...(values.tenant === undefined ? {} : { tenantId: values.tenant }),
    ...(values.channel === undefined ? {} : { channelId: values.channel }),
    ...(values.limit === undefined ? {} : { limit: integerValue("limit", values.limit, 1, 200) }),
    ...(values.cursor === undefined ? {} : { cursor: values.cursor }),
  };
  printJson(io, await withService(values.db, io, (admin) => admin.audit(query)));
}

export async function adminToken(args: string[], io: Io): Promise<void> {
  const { values } = parse(args, {
    tenant: { type: "string" },
    tenants: { type: "string" },
    org: { type: "string" },
    expires: { type: "string" },
  });
  const tenant = required("tenant", values.tenant);
  const expires = values.expires ?? "1h";
  if (!/^\d+\s*(s|sec|secs|m|min|mins|h|hr|hrs|d|day|days|w|week|weeks)$/.test(expires)) {
    throw new UsageError(`--expires takes a duration such as 30m, 1h or 7d, not "${expires}"`);
  }
  const tenantIds = [...new Set([tenant, ...(list(values.tenants) ?? [])])];
  if ((io.env.CHANNELKIT_ADMIN_JWT_SECRET?.length ?? 0) < 32) {
    io.err(errorLine("WARNING: CHANNELKIT_ADMIN_JWT_SECRET is shorter than 32 characters: a server in production refuses it (openssl rand -hex 32)."));
  }
  printJson(io, { token: await signAdminToken(io.env, tenantIds, values.org, expires) });
}

export async function serveCommand(args: string[], io: Io): Promise<void> {
  const { values } = parse(args, {
    port: { type: "string" },
    host: { type: "string" },
    demo: { type: "boolean" },
    "turn-lease-ms": { type: "string" },
    "admin-dev-mode": { type: "boolean" },
    livechat: { type: "string" },
    "drain-ms": { type: "string" },
    "rate-limits": { type: "string" },
    "trust-proxy": { type: "string" },
  });
  const rawLimits = values["rate-limits"];
  const rateLimits = rawLimits === undefined ? {} : rawLimits === "off" ? false : rateLimitsValue("rate-limits", rawLimits, serviceRateLimitsWireSchema);
  const rawTrust = values["trust-proxy"] ?? "false";
  const trustProxy = rawTrust === "true" ? true : rawTrust === "false" ? false : integerValue("trust-proxy", rawTrust, 0, 100);
  const drainMs = integerValue("drain-ms", values["drain-ms"] ?? "10000", 0, 3_600_000);
  const livechat = oneOf("livechat", values.livechat, ["inbox", "bridge", "off"] as const) ?? "inbox";
  const rawPort = values.port ?? io.env.PORT ?? "3000";
  const port = /^\d{1,5}$/.test(rawPort) ? Number(rawPort) : Number.NaN;
  if (!(port >= 0 && port <= 65535)) throw new UsageError(`--port takes a port number from 0 to 65535, not "${rawPort}"`);
  const host = values.host ?? "127.0.0.1";
  const rawLease = values["turn-lease-ms"];
  const turnLeaseMs = rawLease === undefined ? undefined : /^\d{1,9}$/.test(rawLease) ? Number(rawLease) : Number.NaN;
  if (turnLeaseMs !== undefined && !(turnLeaseMs >= 100)) {
    throw new UsageError(`--turn-lease-ms takes a number of milliseconds, 100 or more, not "${rawLease}"`);
  }
  // The widget's script is served with the routes, so an embed needs nothing else; the demo
  // page at `/` learns its key once the demo is provisioned, after the server listens.
  let demoWidget: DemoWidget | null = null;
  const plugins = [widgetAsset(), ...(values.demo ? [demoPage(() => demoWidget?.key ?? null)] : [])];
  const service = await openService(values.db, io, { turnLeaseMs, adminDevMode: values["admin-dev-mode"] === true, livechat, plugins, rateLimits, trustProxy });
  const server = await serve(service, { port, host });
  if (values.demo) demoWidget = await provisionDemo(service, server.url, resolveDb(values.db, io.env), io);
  io.out(`listening on ${server.url}`);

  const stop = async () => {
    // The server stops accepting first; the runs in flight get --drain-ms to finish, the rest
    // are stored cancelled, and the live-chat subscriptions (which never end by themselves) end.
    const closing = server.close();
    await service.close({ drainMs });
    await closing;
    process.exit(0);
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}
