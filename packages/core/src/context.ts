import type { AdminCaller, AuditTarget, ChannelAdmin } from "./admin/operations.js";
import type { AuditOperation } from "./admin/audit.js";
import type { SecretBox } from "./auth/secret-box.js";
import type { TokenEstimator } from "./conversations/tokens.js";
import type { Flow } from "./flows/define.js";
import type { FlowIdentity } from "./runs/json.js";
import type { LiveChat } from "./livechat/live-chat.js";
import type { RateLimiter } from "./ratelimit/limiter.js";
import type { OpenStreams } from "./ratelimit/open-streams.js";
import type { RunLifecycle } from "./runs/lifecycle.js";
import type { RunStreams } from "./streams/run-streams.js";
import type { RunPart } from "./runs/driver.js";
import type { StartedRun, StartRunInput } from "./runs/start.js";
import type { ServiceTelemetry } from "./telemetry/telemetry.js";
import type { Storage } from "./storage/types.js";
import type { PluginRegistry } from "./plugin/registry.js";

/** Where the service reports what it cannot answer with: failures of its own, warnings. */
export interface Logger {
  warn(message: string, ...details: unknown[]): void;
  error(message: string, ...details: unknown[]): void;
}

/** A registered flow with its resolved identity. */
export interface RegisteredFlow extends FlowIdentity {
  flow: Flow;
}

/** Keeps `service.close()` waiting until released: work of a route that must finish before the storage closes. */
export type ReleaseHold = () => void;

/**
 * What a route asks of {@link Runs.start}: a run on a channel and a conversation, named by its
 * id, by an external key that maps to one (a chat platform's thread id: the same key is
 * always the same conversation of the channel, created by its first message), or null for a
 * new one.
 */
export type RunFlowInput = Omit<StartRunInput, "conversation"> & {
  conversation: StartRunInput["conversation"] | { externalKey: string };
};

/** Running flows: the one way every channel, built-in or a plugin's, runs one. */
export interface Runs {
  /**
   * Starts a run of a channel's flow: creates the conversation when it is new and takes the
   * run's ticket in it, then hands back the steps that wait for the turn, run the flow and
   * store the outcome, with the turns, run time limits, live chat and hooks of every channel.
   * Rejects before anything runs: `conversation_not_found` when `conversation` is not one of
   * the channel's, or when the storage fails. Answer it with `runToEnd` + `runDocument`
   * (JSON), `uiMessageStream` (the AI SDK stream), or `ctx.streams.record` on a channel with
   * resumable streams.
   */
  start(input: RunFlowInput & { flowEvents: true }): Promise<StartedRun<RunPart>>;
  start(input: RunFlowInput): Promise<StartedRun>;
  /**
   * Stops a run in flight wherever it runs: at once on this instance, through the store's
   * feed on another instance on the same database when it was started `stoppable`. It is
   * stored `cancelled` with what it
   * produced so far, as a run whose client left. Resolves once asked, to whether the run was
   * running here; a run that already ended is left as stored. (A channel with resumable
   * streams also has `ctx.streams.cancel`, by conversation, which waits for the stored end.)
   */
  cancel(runId: string, reason?: unknown): Promise<boolean>;
  /** Keeps `service.close()` waiting until the returned function is called. */
  hold(): ReleaseHold;
  /** Whether `service.close()` began: a run started now is aborted as it begins. */
  readonly closed: boolean;
  /** How long a run holds its conversation's turn without renewing it, in ms (`turnLeaseMs`). */
  readonly leaseMs: number;
}

/** Counting requests against the rate limits (docs/security.md): a route counts a request once it knows who sends it. */
export type RateLimits = Pick<
  RateLimiter,
  "addressOf" | "forKey" | "forChannel" | "forWebhook" | "forTenant" | "forRefusedAdmin" | "failedAuthentication" | "afterRefusal"
>;

/** The caps on streams open at once: a route answering a stream that stays open opens it through them. */
export type OpenStreamCaps = Pick<OpenStreams, "forKey" | "forAgent">;

/** Resumable streams: recorded runs, their followers and cancels, across instances. */
export type ResumableStreams = Pick<RunStreams, "records" | "record" | "recordToEnd" | "resume" | "cancel">;

/** Live chat: a conversation's mode and the human side's actions, across instances. */
export type LiveChatService = Pick<
  LiveChat,
  "provider" | "state" | "waitTimeoutMs" | "cancel" | "accept" | "close" | "unavailable" | "send" | "subscribe" | "subscribeTenant" | "openStream"
>;

/** The admin operations a plugin may run, recorded in the audit trail under the caller it names. */
export interface AdminAccess {
  /** The operations of `service.admin`, acting for `caller`: confined to its tenant when it names one, recorded under its actor. */
  as(caller: AdminCaller): ChannelAdmin;
  /** Records in the audit trail that `caller`'s `operation` on `target` was refused with `error`. */
  refused(caller: AdminCaller, operation: AuditOperation, target: AuditTarget, error: unknown): Promise<void>;
}

/** What a plugin hears and registers: the channel types of the service's plugins. */
export type PluginServices = Pick<PluginRegistry, "channelTypes">;

/**
 * What every route receives: the service's dependencies and settings, as interfaces of what a
 * plugin may call. The service's own machinery (the run lifecycle, the limiter's bookkeeping)
 * is not part of it.
 */
export interface ServiceContext {
  /** What the service's plugins registered: their channel types. */
  plugins: PluginServices;
  storage: Storage;
  flows: ReadonlyMap<string, RegisteredFlow>;
  secrets: SecretBox;
  logger: Logger;
  maxBodyBytes: number;
  historyLimit: number;
  /** The path the service's routes are under (`""` for the root), without a trailing `/`. */
  basePath: string;
  estimateTokens: TokenEstimator;
  /** Whether the service runs in production (the `production` option, else `NODE_ENV`): development conveniences are refused. */
  production: boolean;
  /** Running flows. */
  runs: Runs;
  /** Live chat: its mode machine, its provider and its feed between instances. */
  livechat: LiveChatService;
  /** The rate limits. */
  limits: RateLimits;
  /** The caps on streams open at once. */
  openStreams: OpenStreamCaps;
  /** Resumable streams. */
  streams: ResumableStreams;
  /** Administration of tenants, channels, keys and secrets, as a named caller. */
  admin: AdminAccess;
}

/**
 * The service as its own modules see it: the context, and the machinery behind it. Never
 * handed to a plugin.
 */
export interface ServiceInternals extends Omit<ServiceContext, "plugins" | "livechat" | "limits" | "streams" | "openStreams"> {
  plugins: PluginRegistry;
  lifecycle: RunLifecycle;
  livechat: LiveChat;
  limits: RateLimiter;
  openStreams: OpenStreams;
  streams: RunStreams;
  /** The service's tracer and metrics (`@opentelemetry/api`: no-ops without an SDK). */
  telemetry: ServiceTelemetry;
}
