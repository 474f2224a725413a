import type { ConversationMode, NewMessage, RunStatus } from "../storage/types.js";

/** How a reply is presented where a channel shows more than its text (see `suggestions()`). */
export interface ReplyOptions {
  suggestions?: string[];
  sources?: unknown[];
  expectedResponseType?: string;
}

/** What a finished run produced, before it is encoded as JSON or as the stream's end. */
export interface RunOutcome {
  runId: string;
  conversationId: string;
  status: RunStatus;
  result: unknown;
  /** The flow's error message when `status` is `error`. */
  error: string | null;
  /** Messages this run produced (not the user's), in order. */
  produced: NewMessage[];
  executionOrder: string[];
  /** ISO 8601. */
  startedAt: string;
  /** ISO 8601. */
  completedAt: string;
  durationMs: number;
  /** Set when the run handed the conversation over to live chat. */
  livechatMode: ConversationMode | null;
  /** Presentation of replies, by index in `produced`, for those the flow gave any. */
  replyOptions: ReadonlyMap<number, ReplyOptions>;
  /** Variables the flow set in this run (`setVariables`), merged. */
  variables: Record<string, unknown>;
}
