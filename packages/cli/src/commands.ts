import { channelRateLimitsWireSchema, type ChannelAdmin, isServiceError, ServiceError, serviceRateLimitsWireSchema } from "@channelkit/core";
import { serve } from "@channelkit/node";
import { widgetAsset } from "@channelkit/widget/plugin";
import { signAdminToken } from "./admin-token.js";
import { booleanValue, capValue, integerValue, jsonValue, oneOf, parse, rateLimitsValue, required, streamLimitsValue } from "./args.js";
import { findConfig } from "./config.js";
import { type DemoWidget, provisionDemo } from "./demo.js";
import { checkTenantsExist } from "./known-tenants.js";
import { demoPage } from "./demo-page.js";
import { CliError, logLine, reportError, UsageError } from "./errors.js";
import { demoFlowsHint, type Host, type HostFlags, type Io, openHost, openHostStorage } from "./host.js";

export type { Io } from "./host.js";

const ENVIRONMENTS = ["prod", "dev", "staging"] as const;

/** How long `serve` may take to close after `--drain-ms`, storing what the drain cancelled, before it stops without it. */
const CLOSE_GRACE_MS = 5000;

/** How long `serve --otel` may take, once the service closed, to export the last spans and metrics. */
const OTEL_FLUSH_MS = 5000;

/**
 * Runs `action` with the service's admin, recorded in the audit trail as the actor `cli`, then
 * closes the service. A flow the service does not know is explained: without a config file,
 * the command knows the demo flows only.
 */
async function withAdmin<T>(flags: HostFlags, io: Io, action: (admin: ChannelAdmin, host: Host) => Promise<T>): Promise<T> {
  const host = await openHost(flags, io);
  try {
    return await action(host.service.admin.as("cli"), host);
  } catch (error) {
    if (isServiceError(error) && error.code === "validation_error" && error.message.startsWith("Unknown flow")) {
      throw new ServiceError("validation_error", `${error.message}${demoFlowsHint(host, io)}`, { details: error.details });
    }
    throw error;
  } finally {
    await host.service.close();
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

/** `migrate`: brings the schema of the storage (the config's, else `--db`'s) up to date, the tables of the config's plugins included. */
export async function migrate(args: string[], io: Io): Promise<void> {
  const { values } = parse(args, {});
  const { storage } = await openHostStorage(values, io);
  await storage.close();
  printJson(io, { migrated: true });
}

/** `tenant create --name NAME`: prints `{"tenant":{"id","name","created_at"}}`. */
export async function tenantCreate(args: string[], io: Io): Promise<void> {
  const { values } = parse(args, { name: { type: "string" } });
  const name = required("name", values.name);
  const { tenant } = await withAdmin(values, io, (admin) => admin.createTenant({ name }));
  printJson(io, { tenant: { id: tenant.id, name: tenant.name, created_at: tenant.createdAt } });
}

/** `tenant list`: prints `{"tenants":[{"id","name","created_at"},…]}`, oldest first. */
export async function tenantList(args: string[], io: Io): Promise<void> {
  const { values } = parse(args, {});
  printJson(io, await withAdmin(values, io, (admin) => admin.listTenants()));
}

/** `channel list [--tenant ID]`: prints `{"channels":[…]}`, each as `channel show` shows it, oldest first. */
export async function channelList(args: string[], io: Io): Promise<void> {
  const { values } = parse(args, { tenant: { type: "string" } });
  if (values.tenant === "") throw new UsageError("--tenant takes a tenant ID");
  printJson(io, await withAdmin(values, io, (admin) => admin.listChannels(values.tenant === undefined ? {} : { tenantId: values.tenant })));
}

/** `channel show ID`: prints `{"channel":{…}}`, the channel's settings (never its key or signing secret). */
export async function channelShow(args: string[], io: Io): Promise<void> {
  const { values, positionals } = parse(args, {}, 1);
  printJson(io, await withAdmin(values, io, (admin) => admin.getChannel(positionals[0] as string)));
}

/** `channel create --tenant ID --flow NAME …`: prints the channel, its key and its signing secret (shown once). */
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
    "retention-days": { type: "string" },
    settings: { type: "string" },
    setting: { type: "string", multiple: true },
  });
  if (values.type === "") throw new UsageError("--type takes a channel type: api, webhook, or one a plugin of the config registers");
  const input = {
    tenantId: required("tenant", values.tenant),
    flow: required("flow", values.flow),
    // api, webhook, or a type of the config's plugins: the admin names the registered ones when it is none of them.
    type: values.type,
    settings: settingsValue(values.settings, values.setting),
    environment: oneOf("environment", values.environment, ENVIRONMENTS),
    mode: oneOf("mode", values.mode, ["server", "public"] as const),
    allowedOrigins: values["allowed-origin"],
    defaultStream: values["default-stream"],
    requireSignature: values["require-signature"],
    resumableStreams: values["resumable-streams"],
    languages: list(values.languages),
    name: values.name,
    retentionDays: retentionValue(values["retention-days"]),
  };
  printJson(io, await withAdmin(values, io, (admin) => admin.createChannel(input)));
}

/** `--retention-days N|off`: days an ended conversation is kept, or off (null: for ever). */
function retentionValue(value: string | undefined): number | null | undefined {
  if (value === undefined) return undefined;
  return value === "off" ? null : integerValue("retention-days", value, 1, 36_500);
}

/** `channel update ID …`: applies the options given; prints the channel (and a signing secret when signatures were turned on). */
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
      "retention-days": { type: "string" },
      "rate-limits": { type: "string" },
      "resumable-streams": { type: "string" },
      settings: { type: "string" },
      setting: { type: "string", multiple: true },
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
    retentionDays: retentionValue(values["retention-days"]),
    rateLimits: values["rate-limits"] === undefined ? undefined : rateLimitsValue("rate-limits", values["rate-limits"], channelRateLimitsWireSchema),
    resumableStreams: booleanValue("resumable-streams", values["resumable-streams"]),
    settings: settingsValue(values.settings, values.setting),
    ...livechat,
  };
  const defined = Object.fromEntries(Object.entries(patch).filter(([, value]) => value !== undefined));
  if (Object.keys(defined).length === 0) throw new UsageError("channel update needs at least one option to change");
  printJson(io, await withAdmin(values, io, (admin) => admin.updateChannel(positionals[0] as string, defined)));
}

/**
 * A plugin type's settings: `--settings` (a JSON object), then each `--setting NAME=VALUE` (a
 * string; the part after the first `=`), which wins over the same field of `--settings`.
 * Undefined when neither is given. The values, secrets included, are never printed back: the
 * channel shown names the secrets that are set, not their values.
 */
function settingsValue(json: string | undefined, pairs: string[] | undefined): Record<string, unknown> | undefined {
  let parsed: unknown;
  try {
    parsed = json === undefined ? undefined : JSON.parse(json);
  } catch {
    parsed = null;
  }
  // Unlike the other JSON options', the message does not repeat the value: it may hold a secret.
  if (parsed !== undefined && (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))) {
    throw new UsageError(`--settings takes a JSON object, e.g. '{"greeting":"Hello"}'`);
  }
  if (parsed === undefined && pairs === undefined) return undefined;
  const settings: Record<string, unknown> = { ...(parsed as Record<string, unknown> | undefined) };
  for (const pair of pairs ?? []) {
    const at = pair.indexOf("=");
    // The value is not repeated: it may be a secret.
    if (at <= 0) throw new UsageError("--setting takes NAME=VALUE, e.g. --setting bot_token=123:abc");
    settings[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return settings;
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

/** `channel rotate-key ID`: prints the new key, shown once; the old one stops working. */
export async function channelRotateKey(args: string[], io: Io): Promise<void> {
  const { values, positionals } = parse(args, {}, 1);
  printJson(io, await withAdmin(values, io, (admin) => admin.rotateKey(positionals[0] as string)));
}

/** `channel rotate-signing-secret ID`: prints the new signing secret, shown once. */
export async function channelRotateSigningSecret(args: string[], io: Io): Promise<void> {
  const { values, positionals } = parse(args, {}, 1);
  printJson(io, await withAdmin(values, io, (admin) => admin.rotateSigningSecret(positionals[0] as string)));
}

/** `audit [--tenant ID] [--channel ID] [--limit 50] [--cursor C]`: a page of the audit trail, newest first. */
export async function audit(args: string[], io: Io): Promise<void> {
  const { values } = parse(args, { tenant: { type: "string" }, channel: { type: "string" }, limit: { type: "string" }, cursor: { type: "string" } });
  const query = {
    ...(values.tenant === undefined ? {} : { tenantId: values.tenant }),
    ...(values.channel === undefined ? {} : { channelId: values.channel }),
    ...(values.limit === undefined ? {} : { limit: integerValue("limit", values.limit, 1, 200) }),
    ...(values.cursor === undefined ? {} : { cursor: values.cursor }),
  };
  printJson(io, await withAdmin(values, io, (admin) => admin.audit(query)));
}

/** `conversation delete ID`: deletes the conversation and every row of it, prints `{"deleted":{"conversation_id","messages","runs"}}`. */
export async function conversationDelete(args: string[], io: Io): Promise<void> {
  const { values, positionals } = parse(args, {}, 1, "the conversation ID");
  printJson(io, await withAdmin(values, io, (admin) => admin.deleteConversation({ conversationId: positionals[0] as string })));
}

/**
 * `conversation list [--tenant ID] [--channel ID] [--since T] [--until T] [--end-user ID] [--limit 50] [--cursor C]`:
 * a page of conversations, newest first.
 */
export async function conversationList(args: string[], io: Io): Promise<void> {
  const { values } = parse(args, {
    tenant: { type: "string" },
    channel: { type: "string" },
    since: { type: "string" },
    until: { type: "string" },
    "end-user": { type: "string" },
    limit: { type: "string" },
    cursor: { type: "string" },
  });
  const query = {
    ...(values.tenant === undefined ? {} : { tenantId: values.tenant }),
    ...(values.channel === undefined ? {} : { channelId: values.channel }),
    ...(values.since === undefined ? {} : { since: values.since }),
    ...(values.until === undefined ? {} : { until: values.until }),
    ...(values["end-user"] === undefined ? {} : { externalUserId: values["end-user"] }),
    ...(values.limit === undefined ? {} : { limit: integerValue("limit", values.limit, 1, 200) }),
    ...(values.cursor === undefined ? {} : { cursor: values.cursor }),
  };
  printJson(io, await withAdmin(values, io, (admin) => admin.listConversations(query)));
}

/**
 * `conversation export [--tenant ID] [--channel ID] [--conversation ID] [--since T] [--until T] [--end-user ID]`:
 * JSON Lines on stdout, one `{"conversation":…,"messages":[…]}` per line, newest first, each
 * written as it is read from the storage.
 */
export async function conversationExport(args: string[], io: Io): Promise<void> {
  const { values } = parse(args, {
    tenant: { type: "string" },
    channel: { type: "string" },
    conversation: { type: "string" },
    since: { type: "string" },
    until: { type: "string" },
    "end-user": { type: "string" },
  });
  const query = {
    ...(values.tenant === undefined ? {} : { tenantId: values.tenant }),
    ...(values.channel === undefined ? {} : { channelId: values.channel }),
    ...(values.conversation === undefined ? {} : { conversationId: values.conversation }),
    ...(values.since === undefined ? {} : { since: values.since }),
    ...(values.until === undefined ? {} : { until: values.until }),
    ...(values["end-user"] === undefined ? {} : { externalUserId: values["end-user"] }),
  };
  await withAdmin(values, io, async (admin) => {
    for await (const line of await admin.exportConversations(query)) printJson(io, line);
  });
}

/** `end-user erase ID [--tenant ID]`: deletes every conversation the end user took part in, prints `{"erased":{...}}`. */
export async function endUserErase(args: string[], io: Io): Promise<void> {
  const { values, positionals } = parse(args, { tenant: { type: "string" } }, 1, "the end user's ID");
  const input = { externalUserId: positionals[0] as string, ...(values.tenant === undefined ? {} : { tenantId: values.tenant }) };
  printJson(io, await withAdmin(values, io, (admin) => admin.eraseEndUser(input)));
}

/**
 * `secrets reseal`: seals again under CHANNELKIT_SECRET_KEY every secret one of
 * CHANNELKIT_SECRET_KEY_FALLBACKS sealed, prints `{"resealed":[ids],"current":n,"unopened":[ids]}`.
 */
export async function secretsReseal(args: string[], io: Io): Promise<void> {
  const { values } = parse(args, {});
  printJson(io, await withAdmin(values, io, (admin) => admin.resealSecrets()));
}

/** `conversation sweep`: runs the retention sweep now, prints `{"channels","conversations","messages","runs"}`. */
export async function conversationSweep(args: string[], io: Io): Promise<void> {
  const { values } = parse(args, {});
  printJson(io, await withAdmin(values, io, (admin) => admin.sweepRetention()));
}

/** `admin-token --tenant ID …`: prints an HS256 admin token signed with `CHANNELKIT_ADMIN_JWT_SECRET`. */
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
  const secret = io.env.CHANNELKIT_ADMIN_JWT_SECRET;
  if (secret && secret.length < 32) {
    io.err(logLine("WARNING: CHANNELKIT_ADMIN_JWT_SECRET is shorter than 32 characters: a server in production refuses it (openssl rand -hex 32)."));
  }
  const token = await signAdminToken(io.env, tenantIds, values.org, expires);
  await checkTenantsExist(values, io, tenantIds);
  printJson(io, { token });
}

/**
 * `serve`: serves the service (the config's, else the demo flows on `--db`) until SIGINT or
 * SIGTERM, which drain it: the server stops accepting, the runs in flight get `--drain-ms` to
 * finish, those still running are stored `cancelled`, the storage closes, exit 0; at most
 * `--drain-ms` plus 5 s, else exit 1. A second signal stops it at once (exit 1). With
 * `--otel`, an OpenTelemetry SDK exports the service's spans and metrics over OTLP/HTTP; after
 * the service closed it exports the last ones (at most 5 s more).
 */
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
    "streams-per-key": { type: "string" },
    "streams-per-address": { type: "string" },
    "max-connections": { type: "string" },
    "log-format": { type: "string" },
    "access-log": { type: "boolean" },
    otel: { type: "boolean" },
    "pg-pool-size": { type: "string" },
    "pg-statement-timeout-ms": { type: "string" },
    "pg-connection-timeout-ms": { type: "string" },
    "headers-timeout-ms": { type: "string" },
    "request-timeout-ms": { type: "string" },
    "keep-alive-timeout-ms": { type: "string" },
    "retention-interval-ms": { type: "string" },
  });
  const optional = (name: string, min: number, max: number) => {
    const raw = values[name as keyof typeof values];
    return typeof raw === "string" ? integerValue(name, raw, min, max) : undefined;
  };
  const postgres = definedOnly({
    poolSize: optional("pg-pool-size", 1, 1000),
    statementTimeoutMs: optional("pg-statement-timeout-ms", 100, 3_600_000),
    connectionTimeoutMs: optional("pg-connection-timeout-ms", 100, 600_000),
  });
  const timeouts = definedOnly({
    headersTimeoutMs: optional("headers-timeout-ms", 1000, 600_000),
    requestTimeoutMs: optional("request-timeout-ms", 1000, 3_600_000),
    keepAliveTimeoutMs: optional("keep-alive-timeout-ms", 100, 600_000),
  });
  const rawRetention = values["retention-interval-ms"];
  const retention =
    rawRetention === undefined
      ? undefined
      : rawRetention === "off"
        ? false
        : { intervalMs: integerValue("retention-interval-ms", rawRetention, 1000, 604_800_000) };
  const logFormat = oneOf("log-format", values["log-format"], ["json", "pretty"] as const);
  const rawLimits = values["rate-limits"];
  const rateLimits = rawLimits === undefined ? undefined : rawLimits === "off" ? false : rateLimitsValue("rate-limits", rawLimits, serviceRateLimitsWireSchema);
  const rawTrust = values["trust-proxy"];
  const trustProxy =
    rawTrust === undefined ? undefined : rawTrust === "true" ? true : rawTrust === "false" ? false : integerValue("trust-proxy", rawTrust, 0, 100);
  const streamLimits = streamLimitsValue(values["streams-per-key"], values["streams-per-address"]);
  const maxConnections = capValue("max-connections", values["max-connections"]);
  const drainMs = integerValue("drain-ms", values["drain-ms"] ?? "10000", 0, 3_600_000);
  const livechat = oneOf("livechat", values.livechat, ["inbox", "bridge", "off"] as const);
  const rawPort = values.port ?? io.env.PORT ?? "3000";
  const port = /^\d{1,5}$/.test(rawPort) ? Number(rawPort) : Number.NaN;
  if (!(port >= 0 && port <= 65535)) throw new UsageError(`--port takes a port number from 0 to 65535, not "${rawPort}"`);
  const hostname = values.host ?? "127.0.0.1";
  const rawLease = values["turn-lease-ms"];
  const turnLeaseMs = rawLease === undefined ? undefined : /^\d{1,9}$/.test(rawLease) ? Number(rawLease) : Number.NaN;
  if (turnLeaseMs !== undefined && !(turnLeaseMs >= 100)) {
    throw new UsageError(`--turn-lease-ms takes a number of milliseconds, 100 or more, not "${rawLease}"`);
  }
  const file = values.demo ? findConfig(values.config, io.cwd ?? process.cwd()) : null;
  if (file) throw new UsageError(`--demo serves the demo flows: it cannot be used with ${file.shown} (serve your own service without it)`);
  // The widget's script is served with the routes, so an embed needs nothing else; the demo
  // page at `/` learns its key once the demo is provisioned, after the server listens.
  let demoWidget: DemoWidget | null = null;
  const plugins = [widgetAsset(), ...(values.demo ? [demoPage(() => demoWidget?.key ?? null)] : [])];
  // Before the service is made, which takes its meter then; loaded only with --otel.
  const otel = values.otel ? (await import("./otel.js")).startOtel(io) : null;
  const host = await openHost({ ...values, postgres }, io, {
    turnLeaseMs,
    adminDevMode: values["admin-dev-mode"] === true,
    livechat,
    plugins,
    logFormat,
    accessLog: values["access-log"] === true,
    retention,
    rateLimits,
    trustProxy,
    streamLimits,
  });
  const { service } = host;
  let server: Awaited<ReturnType<typeof serve>>;
  try {
    server = await serve(service, { port, host: hostname, ...timeouts, ...(maxConnections === undefined ? {} : { maxConnections }) });
  } catch (error) {
    await service.close();
    if ((error as NodeJS.ErrnoException).code === "EADDRINUSE") {
      throw new CliError("address_in_use", `${hostname}:${port} is already in use: stop what listens there, or pass another --port`, { cause: error });
    }
    throw error;
  }

  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) {
      process.exit(
        reportError(
          io.err,
          new CliError(
            "shutdown_interrupted",
            `${signal} again: stopped at once; runs still in flight are stored cancelled when their conversation's next run takes their turn over`,
          ),
        ),
      );
    }
    stopping = true;
    // The server stops accepting and starts refusing new requests, the runs in flight get
    // --drain-ms to finish, the rest are stored cancelled, the live-chat subscriptions (which
    // never end by themselves) end, and the storage closes after the last connection: all in
    // this tick, before the line below, so a client that read it finds the drain begun.
    let refused = 0;
    const closing = server.shutdown({
      drainMs,
      onRefused: () => {
        refused += 1;
        // Once: a load balancer that still sends here would otherwise flood the log.
        if (refused === 1)
          io.out(`${signal}: a request arrived on an open connection while draining: answered 503 service_draining (the next ones are counted)`);
      },
    });
    io.out(`${signal}: stopping; runs in flight have ${drainMs} ms to finish (--drain-ms)`);
    // Bounded: a close that hangs (a database that stopped answering) does not keep the process.
    const closeBoundMs = drainMs + CLOSE_GRACE_MS + (otel ? OTEL_FLUSH_MS : 0);
    setTimeout(() => {
      process.exit(
        reportError(
          io.err,
          new CliError(
            "shutdown_timeout",
            `the service did not close within --drain-ms (${drainMs} ms) and ${CLOSE_GRACE_MS} ms more: stopped without it; runs not yet stored are stored cancelled when their conversation's next run takes their turn over`,
          ),
        ),
      );
    }, closeBoundMs);
    closing.then(
      async () => {
        if (refused > 0) io.out(`${signal}: stopped; ${refused} request(s) that arrived while draining were answered 503 service_draining`);
        // After the service closed: the spans of the drain's last runs are exported too.
        await otel?.shutdown(OTEL_FLUSH_MS);
        process.exit(0);
      },
      (error: unknown) => process.exit(reportError(io.err, error)),
    );
  };
  // Before "listening on": a signal the kernel delivers before a handler exists kills the
  // process outright, and whoever read that line may signal at once.
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);

  if (values.demo) demoWidget = await provisionDemo(service, server.url, host.db as string, io);
  if (host.config) io.out(`${host.config.shown}: flows ${host.flows.join(", ")}`);
  io.out(`listening on ${server.url}`);
  if (host.basePath) io.out(`  (the routes are under ${server.url}${host.basePath})`);
}

/** `values` without the keys whose value is undefined: an option not given keeps its default. */
function definedOnly<T extends Record<string, number | undefined>>(values: T): { [K in keyof T]?: number } {
  return Object.fromEntries(Object.entries(values).filter(([, value]) => value !== undefined)) as { [K in keyof T]?: number };
}
