import type { SecretBox } from "./auth/secret-box.js";
import type { TokenEstimator } from "./conversations/tokens.js";
import type { Flow } from "./flows/define.js";
import type { FlowIdentity } from "./runs/json.js";
import type { LiveChat } from "./livechat/live-chat.js";
import type { RateLimiter } from "./ratelimit/limiter.js";
import type { OpenStreams } from "./ratelimit/open-streams.js";
import type { RunLifecycle } from "./runs/lifecycle.js";
import type { RunStreams } from "./streams/run-streams.js";
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

/** What every handler receives: the service's dependencies and settings. */
export interface ServiceContext {
  /** What the service's plugins registered: their channel types, and the hooks that hear of runs. */
  plugins: PluginRegistry;
  storage: Storage;
  flows: ReadonlyMap<string, RegisteredFlow>;
  secrets: SecretBox;
  logger: Logger;
  maxBodyBytes: number;
  historyLimit: number;
  estimateTokens: TokenEstimator;
  /** Whether the service runs in production (the `production` option, else `NODE_ENV`): development conveniences are refused. */
  production: boolean;
  /** The runs in flight: start one with `startRun`, never track one by hand. */
  runs: RunLifecycle;
  /** Live chat: its mode machine, its provider and its feed between instances. */
  livechat: LiveChat;
  /** The rate limits: a route counts a request once it knows who sends it. */
  limits: RateLimiter;
  /** The caps on streams open at once: a route answering a stream opens it through them. */
  openStreams: OpenStreams;
  /** Resumable streams: recorded runs, their followers and cancels, across instances. */
  streams: RunStreams;
}
