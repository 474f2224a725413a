import type { ChannelRecord, ConversationMode, MessageRole, RunStatus } from "../storage/types.js";

/** What every run hook is told: the run, its conversation and its channel. */
export interface RunHookEvent {
  runId: string;
  conversationId: string;
  channel: ChannelRecord;
  flowName: string;
}

/** A run that took its turn and starts its flow. */
export interface RunStartedEvent extends RunHookEvent {
  /** The user's input (`""` for a conversation's `start`). */
  payload: string;
}

/** A run that is stored with its outcome. */
export interface RunEndedEvent extends RunHookEvent {
  status: RunStatus;
  /** The bot's text of the run, whole. */
  text: string;
  /** The error's message of a run stored `error`. */
  error: string | null;
}

/** A conversation's live-chat mode that changed (a handover, an agent accepting, a close...). */
export interface ModeChangedEvent {
  conversationId: string;
  channel: ChannelRecord;
  from: ConversationMode;
  to: ConversationMode;
}

/** A flow handing its conversation over to a human. */
export interface HandoverEvent extends RunHookEvent {
  /** The flow's reason, when it gave one. */
  reason: string | null;
}

/** A message of the live chat: a human agent's, or the user's while a human answers. */
export interface LiveChatMessageEvent {
  conversationId: string;
  channel: ChannelRecord;
  role: MessageRole;
  content: string;
  /** The agent's display name, for an agent's message. */
  agentName: string | null;
}

/**
 * What a plugin hears of runs and live chat, after the fact, on the instance where it
 * happened: a hook never changes a run, and a hook that throws (or rejects) is logged and
 * forgotten. Hooks are called in the order of the service's `plugins`, without waiting for a
 * hook to settle before the run goes on.
 */
export interface RunHooks {
  /** A run took its turn and starts its flow. */
  runStarted?(event: RunStartedEvent): void | Promise<void>;
  /** A run is stored with its outcome (`success`, `error`, `cancelled`). */
  runEnded?(event: RunEndedEvent): void | Promise<void>;
  /** A flow handed its conversation over (to the inbox or the configured provider). */
  handover?(event: HandoverEvent): void | Promise<void>;
  /** A human agent wrote in a conversation (what a chat platform's plugin posts into its thread). */
  agentMessage?(event: LiveChatMessageEvent): void | Promise<void>;
  /** A conversation's live-chat mode changed. */
  modeChanged?(event: ModeChangedEvent): void | Promise<void>;
}
