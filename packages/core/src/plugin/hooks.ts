import type { ServiceContext } from "../context.js";
import type { MessageView } from "../conversations/message-view.js";
import type { RunOutcome } from "../runs/outcome.js";
import type { ChannelRecord, ConversationMode } from "../storage/types.js";

/** What every run hook is told: the run, its conversation and its channel. */
export interface RunHookEvent {
  runId: string;
  conversationId: string;
  channel: ChannelRecord;
  flowName: string;
  /** The run's `metadata`, as the route passed it to `ctx.runs.start` (`{}` without any): where a channel keeps what its hook needs, e.g. a platform's thread id. */
  metadata: Record<string, unknown>;
}

/** A run that took its turn and starts its flow. */
export interface RunStartedEvent extends RunHookEvent {
  /** The user's input (`""` for a conversation's `start`). */
  payload: string;
}

/** A run whose flow ran, stored with its outcome. */
export interface RunEndedEvent extends RunHookEvent {
  /** Its status (`success`, `error`, `cancelled`), the messages it produced, its times. */
  outcome: RunOutcome;
}

/** What every live-chat hook is told: the conversation and its channel. */
export interface LiveChatHookEvent {
  conversationId: string;
  channel: ChannelRecord;
}

/** A conversation's live-chat mode that changed (a handover, an agent accepting, a close...). */
export interface ModeChangedEvent extends LiveChatHookEvent {
  from: ConversationMode;
  to: ConversationMode;
}

/** A flow that handed its conversation over to a human: it waits for an agent. */
export type HandoverEvent = LiveChatHookEvent;

/** A message from the human side of a live chat (an agent's, or a system message of the desk), as stored. */
export interface LiveChatMessageEvent extends LiveChatHookEvent {
  message: MessageView;
}

/**
 * What a plugin hears of runs and live chat, after the fact, on the instance where it
 * happened: a hook never changes a run, and a hook that throws (or rejects) is logged and
 * forgotten. Each is given the service's context (as a route is). Hooks are called in the order of the service's `plugins`, without waiting for a
 * hook to settle before the run goes on.
 */
export interface RunHooks {
  /** A run took its turn and starts its flow (a run whose flow does not run, its message going to a human, is not told). */
  runStarted?(event: RunStartedEvent, ctx: ServiceContext): void | Promise<void>;
  /** A run whose flow ran is stored with its outcome (`success`, `error`, `cancelled`). */
  runEnded?(event: RunEndedEvent, ctx: ServiceContext): void | Promise<void>;
  /** A flow handed its conversation over (to the inbox or the configured provider). */
  handover?(event: HandoverEvent, ctx: ServiceContext): void | Promise<void>;
  /** A human agent wrote in a conversation (what a chat platform's plugin posts into its thread). */
  agentMessage?(event: LiveChatMessageEvent, ctx: ServiceContext): void | Promise<void>;
  /** A conversation's live-chat mode changed. */
  modeChanged?(event: ModeChangedEvent, ctx: ServiceContext): void | Promise<void>;
}
