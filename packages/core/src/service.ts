import { createChannelAdmin, type ChannelAdmin, recordRefusal } from "./admin/operations.js";
import { createSecretBox, DEVELOPMENT_MASTER_KEY } from "./auth/secret-box.js";
import { apiChannel } from "./channels/api/plugin.js";
import { webhookChannel } from "./channels/webhook/plugin.js";
import { widgetChannel } from "./channels/widget/plugin.js";
import type { Logger, RegisteredFlow, ServiceContext, ServiceInternals } from "./context.js";
import { estimateTokens as defaultEstimate, type TokenEstimator } from "./conversations/tokens.js";
import type { Flow } from "./flows/define.js";
import { uuidV5 } from "./flows/identity.js";
import { withCors } from "./http/cors.js";
import { isServiceError, ServiceError } from "./http/errors.js";
import { fromResponse, type IncomingRequest, type Reply, toResponse } from "./http/reply.js";
import { errorReply } from "./http/respond.js";
import { pathnameOf, pathWithin } from "./http/pathname.js";
import { Router } from "./http/router.js";
import { inProcessFeed } from "./livechat/feed.js";
import { LiveChat } from "./livechat/live-chat.js";
import type { LiveChatProvider } from "./livechat/provider.js";
import { trustedHops, type TrustProxy } from "./ratelimit/address.js";
import { RateLimiter } from "./ratelimit/limiter.js";
import { DEFAULT_RATE_LIMITS, serviceRateLimitsSchema, type ServiceRateLimits } from "./ratelimit/rules.js";
import { memoryRateLimitStore, type RateLimitStore } from "./ratelimit/store.js";
import { DEFAULT_STREAM_LIMITS, OpenStreams, type StreamLimits, streamLimitsSchema } from "./ratelimit/open-streams.js";
import { openApiDocument } from "./openapi/document.js";
import { openApiPlugin } from "./openapi/route.js";
import { healthPlugin } from "./health/route.js";
import { type AccessLogEntry, RequestTelemetry } from "./telemetry/request.js";
import { requestIdOf } from "./http/request-id.js";
import { serviceTelemetry } from "./telemetry/telemetry.js";
import { observeLiveChatWaiting } from "./telemetry/livechat-waiting.js";
import { routerEntries } from "./plugin/mount.js";
import { BUILT_IN_CHANNEL_TYPES, mountPlugins, PluginRegistry } from "./plugin/registry.js";
import { RunLifecycle } from "./runs/lifecycle.js";
import { runsOf } from "./runs/runs.js";
import { RunStreams } from "./streams/run-streams.js";
import { checkOptionNames } from "./service-options.js";
import { type RetentionOptions, RetentionSchedule } from "./conversations/retention-schedule.js";
import type { ChannelPlugin } from "./plugin/plugin.js";
import type { ChannelRecord, Storage } from "./storage/types.js";

/** Options of {@link createChannelService}. */
export interface ChannelServiceOptions {
  /** Where channels, keys, conversations and runs live, e.g. `sqlite("./channelkit.db")`. */
  storage: Storage;
  /** The flows channels can be bound to, by name. */
  flows: Flow<any>[];
  /**
   * Master key sealing signing secrets at rest (AES-256-GCM): 32 bytes as 64 hex characters
   * (`openssl rand -hex 32`), usually from `CHANNELKIT_SECRET_KEY`. Required in production.
   */
  secretKey?: string;
  /**
   * Other master keys that still open what they sealed, tried after `secretKey`; nothing new
   * is sealed under them. For rotating the master key without downtime: the old key goes here
   * (usually from `CHANNELKIT_SECRET_KEY_FALLBACKS`, comma-separated) while
   * `service.admin.resealSecrets()` (`channelkit secrets reseal`) seals everything again under
   * the new one; see docs/security.md, "Rotating the master key".
   */
  secretKeyFallbacks?: readonly string[];
  /** When true, a missing `secretKey` is an error. Defaults to `NODE_ENV === "production"`. */
  production?: boolean;
  /**
   * Where handed-over conversations go: `liveChatInbox()` (agents answer through HTTP
   * routes), `liveChatWebhookBridge()` (a help desk), or your own `LiveChatProvider`.
   * Without one a handover is `livechat_unavailable` and the bot keeps the conversation.
   */
  livechat?: LiveChatProvider;
  /**
   * The channels the service mounts before its `plugins`: by default the API, webhook and
   * widget channels (`[apiChannel(), webhookChannel(), widgetChannel()]`). Leave one out, or
   * put a channel of your own in its place.
   */
  channels?: ChannelPlugin[];
  /** Extra channels and features (`adminApi()`, a chat platform's channel...), mounted after `channels` and `livechat`, in this order. */
  plugins?: ChannelPlugin[];
  /** Path prefix the routes are mounted under, e.g. `/chat` (default: none). */
  basePath?: string;
  /** Largest request body accepted, in bytes (default 1 MiB); larger is 413 `payload_too_large`. */
  maxBodyBytes?: number;
  /** Messages a flow's `ctx.history()` returns by default (default 50). */
  historyLimit?: number;
  /** Token estimate of a message (default: ceil(characters / 4)). */
  estimateTokens?: TokenEstimator;
  /** Receives warnings and unexpected failures (default: `console`). Secrets are never passed to it. */
  logger?: Logger;
  /**
   * How long a run holds its conversation's turn without renewing it, in ms (default 30000).
   * A run renews it every third of this while it runs; when the instance running it stops,
   * the conversation's next run takes over after at most this long. Recorded streams of
   * resumable channels hold the same lease: a stream whose instance stopped is ended (its
   * run stored `cancelled`) by another instance within about twice this long.
   */
  turnLeaseMs?: number;
  /**
   * Longest wait, in ms, between two looks at its conversation's queue by a run waiting for
   * its turn (default 100; the waits grow from 2 ms to this). A run of the same process that
   * ends wakes the runs waiting behind it at once; so does a run of another instance when
   * the store announces turns (`Storage.announcesTurns`: `@channelkit/kysely`'s Postgres
   * storage does, through `NOTIFY`), and the looks are then only a fallback.
   */
  turnPollMaxMs?: number;
  /**
   * Longest a run waits for its conversation's turn behind the runs before it, in ms
   * (default 300000, as long as a run may last by default). Past it, the run gives its place
   * up without storing anything, and its client is answered `503 conversation_busy` with
   * `Retry-After` (a stream that began ends with an `error` event saying so): nothing waits
   * for a turn without bound.
   */
  turnWaitTimeoutMs?: number;
  /**
   * Rate limits (see docs/security.md): each limit a `{ requests, windowSeconds }` rule or
   * `false` for none, replacing its default; `store` is where they count (default: the
   * storage's own table, shared by every instance on the database, else this process's
   * memory). `false` turns rate limiting off. Channels may set their own
   * (`admin.updateChannel(id, { rateLimits })`).
   */
  rateLimits?: RateLimitOptions | false;
  /**
   * Whether the client's address (counted by the rate limits) is read from `X-Forwarded-For`:
   * `false` (the default) takes the socket's peer; `true` or a number trusts that many proxies
   * in front of the service, and takes the address the farthest of them saw. Set it only
   * behind proxies that append to `X-Forwarded-For`: without them, any client could send the
   * header and pick its own address.
   */
  trustProxy?: TrustProxy;
  /**
   * Caps on the answers that stay open, counted in this process (see docs/security.md, "Open
   * streams"): the live-chat events, the resumable streams, the inbox feed and every streamed
   * run (execute with `stream`, the widget's chat). `perKey` (default 1000) counts per API key
   * and per agent, `perAddress` (default 100) per client address for publishable keys; each a
   * number of streams or `false` for none, replacing its default. Past a cap the request is
   * 429 `too_many_streams` with `Retry-After`, before anything runs; a stream gives its slot
   * back when it ends for any reason. `false` turns the caps off.
   */
  streamLimits?: StreamLimits | false;
  /**
   * Whether the service answers `GET /public/v1/openapi.json` (under its `basePath`) with the
   * OpenAPI 3.1 document of the routes it mounts (default `true`). `false` leaves the route
   * out (a 404 like any unknown path); `openApiDocument()` still makes the document.
   */
  openapi?: boolean;
  /**
   * Whether the service answers the probes `GET /healthz` (the process answers) and
   * `GET /readyz` (the storage answers, migrations are applied, not closing: else 503), under
   * its `basePath`, off the rate limits (default `true`). `false` leaves them out, for a host
   * that has its own.
   */
  health?: boolean;
  /**
   * Called once per request when it is answered (a stream: when it ends) with its access log
   * entry: time, request id, method, path without the query, route template, status,
   * duration, client address (as the rate limits read it). Off by default;
   * `channelkit serve --access-log` writes each as a line.
   */
  accessLog?: (entry: AccessLogEntry) => void;
  /**
   * The retention sweep, which deletes the conversations that ended more than their channel's
   * `retention_days` ago (channels without one keep theirs for ever): once per `intervalMs`
   * (default an hour) across every instance on the database, one instance at a time. On by
   * default, except on Cloudflare Workers, which have no timers between requests: there,
   * call `service.admin.sweepRetention()` from a Cron Trigger. `false` turns it off here
   * (another instance, or your own schedule, sweeps). See docs/operations.md, "Retention".
   */
  retention?: RetentionOptions | false;
}

/** The `rateLimits` option: {@link ServiceRateLimits} to replace, and where to count. */
export interface RateLimitOptions extends Partial<ServiceRateLimits> {
  /** Where the limits count: default the storage's own store, else this process's memory. */
  store?: RateLimitStore;
}

/** What an adapter knows of a request's connection, beyond the Web `Request`. */
export interface ConnectionInfo {
  /** The socket's peer address, e.g. `203.0.113.7` (see `trustProxy`). */
  clientAddress?: string | undefined;
}

/** One route a service answers: a method and a path pattern, `:name` segments for parameters. */
export interface ServiceRoute {
  /** Upper-case HTTP method, e.g. `POST` or `OPTIONS`. */
  method: string;
  /** Path pattern with the service's `basePath` in front, e.g. `/public/v1/api/conversations/:session_id/messages`. */
  path: string;
}

/** A running channel service. */
export interface ChannelService {
  /**
   * Answers one request of the public contract. Every adapter calls this. Pass the
   * connection's client address where the runtime tells it (a Web `Request` does not carry
   * it): the rate limits per address count only requests whose address is known.
   */
  handler(request: Request, connection?: ConnectionInfo): Promise<Response>;
  /**
   * What {@link handler} does, answering a {@link Reply} instead of a Web `Response`, for
   * adapters that write the reply themselves: on Node 20, a `Request` and a `Response` with
   * their streams cost more than the rest of a request. `@channelkit/node` (and so the
   * Express and Fastify adapters) uses this; `request` may be a `Request` or the adapter's
   * own {@link IncomingRequest}.
   */
  dispatch(request: IncomingRequest, connection?: ConnectionInfo): Promise<Reply>;
  /**
   * Every route {@link handler} answers, plugins' routes included. Framework adapters
   * register exactly these paths in the host app, so the host's other routes and its own
   * 404 stay its own; the handler still routes each request itself.
   */
  readonly routes: readonly ServiceRoute[];
  /** Programmatic administration of tenants, channels, keys and signing secrets. */
  admin: ChannelAdmin;
  /**
   * Ends the live-chat subscriptions, lets the runs in flight finish for up to
   * `options.drainMs` (default 0), aborts those still running (each is stored `cancelled`),
   * waits until they are stored, then closes the storage. Stop accepting requests first
   * (`server.close()`), without waiting for it: its open connections end as this ends what
   * they stream. Pass that closing as `options.requestsDone`: the storage then closes once it
   * settled too, after the last request was answered, where a request still in flight would
   * otherwise fail (500) on a closed database. `serve()` of `@channelkit/node` does all this
   * in `shutdown()`; docs/deploying.md, "Shutting down", has the order for other hosts.
   */
  close(options?: {
    /** How long the runs in flight have to finish, in ms, before they are aborted and stored `cancelled` (default 0). */
    drainMs?: number;
    /**
     * Settles once the host answered its last request and closed its last connection (the
     * callback of node:http's `server.close()`, or `RunningServer.close()` of
     * `@channelkit/node`). Awaited after the runs ended, so after the streams they feed; a
     * rejection counts as settled.
     */
    requestsDone?: PromiseLike<unknown>;
  }): Promise<void>;
}

/**
 * Creates the channel service: the whole public contract as one
 * `handler(request: Request): Promise<Response>`.
 *
 * @example
 * const service = await createChannelService({ storage: sqlite("./channelkit.db"), flows: [myFlow] });
 * serve(service, { port: 3000 });
 */
export async function createChannelService(options: ChannelServiceOptions): Promise<ChannelService> {
  checkOptionNames(options);
  const logger = options.logger ?? console;
  const production = options.production ?? nodeEnv() === "production";
  const { turnPollMaxMs } = options;
  if (turnPollMaxMs !== undefined && !(Number.isFinite(turnPollMaxMs) && turnPollMaxMs >= 2)) {
    throw new TypeError(`channelkit: turnPollMaxMs is a number of milliseconds, 2 or more, not ${String(turnPollMaxMs)}`);
  }
  const { turnWaitTimeoutMs } = options;
  if (turnWaitTimeoutMs !== undefined && !(Number.isFinite(turnWaitTimeoutMs) && turnWaitTimeoutMs >= 1)) {
    throw new TypeError(`channelkit: turnWaitTimeoutMs is a number of milliseconds, 1 or more, not ${String(turnWaitTimeoutMs)}`);
  }
  const fallbacks = options.secretKeyFallbacks;
  if (fallbacks !== undefined && !(Array.isArray(fallbacks) && fallbacks.every((key) => typeof key === "string"))) {
    throw new TypeError("channelkit: secretKeyFallbacks is a list of master keys (64 hexadecimal characters each), e.g. [process.env.OLD_KEY]");
  }
  if (!options.secretKey) {
    if (production) {
      throw new Error("channelkit: a master key is required in production: set CHANNELKIT_SECRET_KEY (openssl rand -hex 32).");
    }
    logger.warn(
      "channelkit: WARNING: no master key configured (CHANNELKIT_SECRET_KEY); signing secrets are sealed with a public development key. Never run like this in production.",
    );
  }

  await checkSchema(options, logger);

  const flows = new Map<string, RegisteredFlow>();
  for (const flow of options.flows) {
    if (flows.has(flow.name)) throw new Error(`channelkit: two flows are named "${flow.name}"`);
    flows.set(flow.name, { flow, name: flow.name, id: flow.id ?? (await uuidV5(flow.name)), version: flow.version ?? null });
  }

  const telemetry = serviceTelemetry();
  const accessLog = options.accessLog;
  const streamLimits = streamCaps(options);
  const limits = rateLimiter(options, streamLimits !== null && streamLimits.perAddress !== false);
  const openStreams = new OpenStreams(streamLimits, (request) => limits.addressOf(request));
  const feed = options.storage.feed ?? inProcessFeed();
  const leaseMs = options.turnLeaseMs ?? 30_000;
  const pluginRegistry = new PluginRegistry(logger);
  const basePath = (options.basePath ?? "").replace(/\/+$/, "");
  const internals: ServiceInternals = {
    basePath,
    telemetry,
    plugins: pluginRegistry,
    storage: options.storage,
    flows,
    secrets: createSecretBox(options.secretKey ?? DEVELOPMENT_MASTER_KEY, options.secretKeyFallbacks ?? []),
    logger,
    maxBodyBytes: options.maxBodyBytes ?? 1024 * 1024,
    historyLimit: options.historyLimit ?? 50,
    estimateTokens: options.estimateTokens ?? defaultEstimate,
    lifecycle: new RunLifecycle({
      logger,
      leaseMs,
      feed,
      announcesTurns: options.storage.announcesTurns === true,
      turnPollMaxMs: options.turnPollMaxMs,
      turnWaitTimeoutMs,
    }),
    // Set below: the runs and the admin act through the context they are part of.
    runs: undefined as never,
    admin: undefined as never,
    livechat: new LiveChat({
      storage: options.storage,
      feed,
      provider: options.livechat ?? null,
      logger,
      estimateTokens: options.estimateTokens ?? defaultEstimate,
      hooks: pluginRegistry,
    }),
    production,
    limits,
    openStreams,
    streams: new RunStreams({ store: options.storage.runStreams, feed, logger, leaseMs }),
  };
  internals.runs = runsOf(internals);
  internals.admin = {
    as: (caller) => createChannelAdmin(internals, caller),
    refused: (caller, operation, target, error) => recordRefusal(internals, caller, operation, target, error),
  };
  // What every route and plugin gets: the same service, seen through its public interfaces.
  const ctx: ServiceContext = internals;
  pluginRegistry.attach(ctx);

  const plugins = [...(options.channels ?? defaultChannels()), ...(options.livechat ? [options.livechat] : []), ...(options.plugins ?? [])];
  if (options.openapi !== false) plugins.push(openApiPlugin(() => openApiDocument({ plugins: mounted, basePath })));
  // Set when `close()` begins: not ready from then on, while the runs in flight drain.
  let closing = false;
  if (options.health !== false) {
    // A probe path the host's own plugins serve stays theirs.
    const taken = new Set(plugins.flatMap((plugin) => (plugin.routes ?? []).filter((route) => route.method === "GET").map((route) => route.path)));
    plugins.push(healthPlugin({ storage: options.storage, plugins: () => mounted, closing: () => closing }, taken));
  }
  const mounted = await mountPlugins(plugins, ctx, pluginRegistry);
  // Once the plugins registered their channel types: a channel of a type none registers is told of.
  await checkChannels(ctx);
  const retention = retentionSchedule(ctx, options.retention);
  const router = new Router<ServiceContext>();
  const routes: ServiceRoute[] = [];
  for (const entry of routerEntries(
    mounted.flatMap((plugin) => plugin.routes ?? []),
    (request) => internals.limits.exempt(request),
  )) {
    router.add(entry);
    routes.push(Object.freeze({ method: entry.method.toUpperCase(), path: basePath + entry.path }));
  }
  // With an SDK and a live chat: the gauge of the waiting conversations, read from the store.
  const stopWaitingGauge = observeLiveChatWaiting(options.storage, internals.livechat.provider, logger);

  async function dispatch(request: IncomingRequest, connection?: ConnectionInfo): Promise<Reply> {
    if (connection?.clientAddress) internals.limits.remember(request, connection.clientAddress);
    const requestId = requestIdOf(request);
    // Without an SDK, a request makes no telemetry object at all.
    const access = accessLog
      ? { write: accessLog, requestId, path: pathnameOf(request.url), clientAddress: internals.limits.addressOf(request) ?? null }
      : null;
    const observed = access || telemetry.metered || telemetry.tracing() ? new RequestTelemetry(telemetry, request.method, access) : null;
    let reply: Reply;
    try {
      const pathname = pathWithin(pathnameOf(request.url), basePath);
      if (pathname === null) throw new ServiceError("not_found");
      const { route, params } = router.match(request.method, pathname);
      observed?.matched(basePath + route.path);
      const answer = await (observed === null ? route.handle(request, params, ctx) : observed.within(() => route.handle(request, params, ctx)));
      reply = answer instanceof Response ? fromResponse(answer) : answer;
    } catch (error) {
      if (!isServiceError(error)) logger.error("channelkit: unexpected error while handling a request", error, { request_id: requestId });
      const refusal = isServiceError(error) ? await ctx.limits.afterRefusal(request, error) : new ServiceError("runtime_error", undefined, { cause: error });
      if (telemetry.metered && (refusal.code === "rate_limited" || refusal.code === "too_many_streams"))
        telemetry.refusals.add(1, { "error.type": refusal.code });
      reply = errorReply(refusal);
    }
    const limited = internals.limits.headersOf(request);
    if (limited !== undefined) Object.assign(reply.headers, limited);
    reply.headers["x-request-id"] = requestId;
    const answer = withCors(request, reply);
    return observed === null ? answer : observed.answered(answer);
  }

  return {
    handler: async (request, connection) => toResponse(await dispatch(request, connection)),
    dispatch,
    routes: Object.freeze(routes),
    admin: createChannelAdmin(ctx),
    async close(closeOptions = {}) {
      closing = true;
      await retention?.close();
      // Subscriptions never end by themselves: a server waiting for its connections would wait forever.
      internals.livechat.endStreams();
      internals.streams.close();
      await internals.lifecycle.drain(closeOptions.drainMs ?? 0);
      await internals.lifecycle.close();
      await internals.streams.settled();
      await internals.livechat.drain();
      for (const plugin of mounted) {
        try {
          await plugin.close?.();
        } catch (error) {
          logger.error(`channelkit: the plugin "${plugin.id}" failed to close`, error);
        }
      }
      if (closeOptions.requestsDone) {
        await Promise.resolve(closeOptions.requestsDone).catch(() => undefined);
        // A request in flight as closing began may have started a run since: aborted as it
        // began (the service is closed), it is stored before the storage closes.
        await internals.lifecycle.close();
        await internals.livechat.drain();
      }
      stopWaitingGauge();
      // The storage closes its own feed; the in-process one holds only listeners.
      if (!options.storage.feed) await internals.livechat.feed.close();
      await options.storage.close();
    },
  };
}

/** How to bring a schema up to date, in the words of an error or a warning. */
const HOW_TO_MIGRATE = "run `await storage.migrate()` before `createChannelService(...)`, or `npx channelkit migrate --db <the same database>`";

/**
 * Refuses to start on a schema that is missing or behind (every request would otherwise
 * answer 500, its log saying `no such table: api_keys`), naming the pending migrations and
 * how to apply them, the tables of the service's plugins included (`ChannelPlugin.schema`,
 * pending as `<plugin id>/<name>`); warns of migrations this version does not know (a newer
 * one migrated the database). Storages without `schemaStatus` are not checked.
 */
async function checkSchema(options: ChannelServiceOptions, logger: Logger): Promise<void> {
  const { storage } = options;
  if (!storage.schemaStatus) return;
  // Every plugin the service mounts may have tables: its channels, its live chat, its plugins.
  const plugins = [...(options.channels ?? []), ...(options.livechat ? [options.livechat] : []), ...(options.plugins ?? [])];
  const { known, pending, unknown } = await storage.schemaStatus({ plugins });
  if (pending.length > 0 && pending.length === known.length) {
    throw new Error(`channelkit: the database has no channelkit schema (none of its ${known.length} migrations is applied): ${HOW_TO_MIGRATE}.`);
  }
  if (pending.length > 0) {
    // A plugin's migration is recorded as `<plugin id>/<name>`: those run when migrate is given the plugins.
    const withPlugins = pending.some((name) => name.includes("/")) ? " (the plugins' migrations run with `await storage.migrate({ plugins })`)" : "";
    throw new Error(
      `channelkit: the database schema is behind: ${pending.length} of ${known.length} migrations are not applied (${pending.join(", ")}): ${HOW_TO_MIGRATE}${withPlugins}.`,
    );
  }
  if (unknown.length > 0) {
    logger.warn(
      `channelkit: the database has migrations this version of channelkit does not know (${unknown.join(", ")}): a newer version migrated it. Upgrade this instance.`,
    );
  }
}

/** Ids of at most ten channels, then how many more, for a log line. */
function channelList(ids: string[]): string {
  const shown = ids.slice(0, 10).join(", ");
  return ids.length > 10 ? `${shown} and ${ids.length - 10} more` : shown;
}

/**
 * Warns at start-up of channels (not archived) that cannot serve as configured: those bound to
 * a flow this service does not register (their runs answer 503 `flow_unavailable`), those
 * whose signing secret the configured master key cannot open (sealed under another key: their
 * signed requests answer 503 `signing_secret_unavailable`), those of a channel type no plugin
 * of this service registers (no route serves them), and those whose secret settings the master
 * key cannot open (their plugin cannot read them: `channelSettings` answers 503
 * `channel_settings_unavailable`). One read of the channels, one decryption per stored secret.
 */
async function checkChannels(ctx: ServiceContext): Promise<void> {
  let channels: ChannelRecord[];
  try {
    channels = (await ctx.storage.listChannels()).filter((channel) => channel.state !== "archived");
  } catch (error) {
    ctx.logger.error("channelkit: the channels could not be read at start-up (is the schema migrated? `await storage.migrate()`)", error);
    return;
  }
  const unbound = channels.filter((channel) => !ctx.flows.has(channel.flowName));
  if (unbound.length > 0) {
    const registered = [...ctx.flows.keys()].join(", ") || "none";
    ctx.logger.warn(
      `channelkit: ${unbound.length} channel(s) are bound to a flow this service does not register, so their runs answer 503 flow_unavailable: ${channelList(unbound.map((channel) => `${channel.id} (flow "${channel.flowName}")`))}. Registered flows: ${registered}. Pass the flow in createChannelService({ flows }), or bind the channel to another (admin.updateChannel(id, { flow })).`,
    );
  }
  const sealed = channels.filter((channel) => channel.signingSecretEncrypted !== null);
  const opened = await Promise.all(sealed.map((channel) => ctx.secrets.sealedUnder(channel.signingSecretEncrypted as string)));
  const unopened = sealed.filter((_, i) => opened[i] === null);
  if (unopened.length > 0) {
    ctx.logger.warn(
      `channelkit: the signing secrets of ${unopened.length} channel(s) cannot be opened with the configured master key (CHANNELKIT_SECRET_KEY): they were sealed under another key, and those that require signatures answer 503 signing_secret_unavailable: ${channelList(unopened.map((channel) => channel.id))}. Start with the master key that sealed them, or rotate their signing secrets (admin.rotateSigningSecret(id)).`,
    );
  }
  const types = ctx.plugins.channelTypes;
  const untyped = channels.filter((channel) => !(BUILT_IN_CHANNEL_TYPES as readonly string[]).includes(channel.type) && !types.has(channel.type));
  if (untyped.length > 0) {
    const registered = [...BUILT_IN_CHANNEL_TYPES, ...types.keys()].join(", ");
    ctx.logger.warn(
      `channelkit: ${untyped.length} channel(s) are of a channel type no plugin of this service registers, so no route serves them and their settings cannot be changed: ${channelList(untyped.map((channel) => `${channel.id} (type "${channel.type}")`))}. Registered types: ${registered}. Add the plugin that registers the type to createChannelService({ plugins }), or archive the channel.`,
    );
  }
  const withSettings = channels.filter((channel) => channel.sealedSettings !== null);
  const settingsOpened = await Promise.all(withSettings.map((channel) => ctx.secrets.sealedUnder(channel.sealedSettings as string)));
  const settingsUnopened = withSettings.filter((_, i) => settingsOpened[i] === null);
  if (settingsUnopened.length > 0) {
    ctx.logger.warn(
      `channelkit: the secret settings of ${settingsUnopened.length} channel(s) cannot be opened with the configured master key (CHANNELKIT_SECRET_KEY): they were sealed under another key, so their plugins cannot read them (channelSettings answers 503 channel_settings_unavailable): ${channelList(settingsUnopened.map((channel) => channel.id))}. Start with the master key that sealed them, or send their secret settings again (admin.updateChannel(id, { settings })).`,
    );
  }
  const underFallback = new Set([
    ...sealed.filter((_, i) => opened[i] === "fallback").map((channel) => channel.id),
    ...withSettings.filter((_, i) => settingsOpened[i] === "fallback").map((channel) => channel.id),
  ]);
  if (underFallback.size > 0) {
    ctx.logger.warn(
      `channelkit: ${underFallback.size} channel(s) hold secrets sealed under a fallback master key (CHANNELKIT_SECRET_KEY_FALLBACKS), not the current one: reseal them (\`channelkit secrets reseal\`, or service.admin.resealSecrets()) before the fallback key is removed: ${channelList([...underFallback])}.`,
    );
  }
}

/** The periodic retention sweep the options ask for, started; null when off. */
function retentionSchedule(ctx: ServiceContext, option: RetentionOptions | false | undefined): RetentionSchedule | null {
  if (option === false) return null;
  const intervalMs = option?.intervalMs ?? 3_600_000;
  if (!(Number.isInteger(intervalMs) && intervalMs >= 1000)) {
    throw new TypeError(`channelkit: retention.intervalMs is a whole number of milliseconds, 1000 or more, not ${String(intervalMs)}`);
  }
  // Workers run code only within a request (or a Cron Trigger): a timer outside one has nothing to run on.
  if (option === undefined && globalThis.navigator?.userAgent === "Cloudflare-Workers") return null;
  const schedule = new RetentionSchedule(ctx, intervalMs);
  schedule.start();
  return schedule;
}

/** The caps on open streams, from the options: the defaults where they say nothing, null when off. */
function streamCaps(options: ChannelServiceOptions): Required<StreamLimits> | null {
  if (options.streamLimits === false) return null;
  const checked = streamLimitsSchema.safeParse(options.streamLimits ?? {});
  if (!checked.success)
    throw new TypeError(
      `channelkit: invalid streamLimits option: ${checked.error.issues.map((issue) => `${issue.path.join(".") || "streamLimits"}: ${issue.message}`).join("; ")}`,
    );
  const { perKey, perAddress } = checked.data;
  return { perKey: perKey ?? DEFAULT_STREAM_LIMITS.perKey, perAddress: perAddress ?? DEFAULT_STREAM_LIMITS.perAddress };
}

/** The service's rate limiter, from its options: the defaults where they say nothing. */
function rateLimiter(options: ChannelServiceOptions, addressesNeeded: boolean): RateLimiter {
  const hops = trustedHops(options.trustProxy);
  if (options.rateLimits === false) return new RateLimiter(null, memoryRateLimitStore(), hops, addressesNeeded);
  const { store, ...limits } = options.rateLimits ?? {};
  const checked = serviceRateLimitsSchema.safeParse(limits);
  if (!checked.success)
    throw new TypeError(
      `channelkit: invalid rateLimits option: ${checked.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`).join("; ")}`,
    );
  return new RateLimiter({ ...DEFAULT_RATE_LIMITS, ...checked.data }, store ?? options.storage.rateLimits ?? memoryRateLimitStore(), hops);
}

/** The channels a service mounts unless told otherwise. */
function defaultChannels(): ChannelPlugin[] {
  return [apiChannel(), webhookChannel(), widgetChannel()];
}

/** `NODE_ENV` where a `process` global exists (Node, Bun, Deno's compatibility layer). */
function nodeEnv(): string | undefined {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  return env?.NODE_ENV;
}
