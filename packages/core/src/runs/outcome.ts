import type { ConversationMode, NewMessage, RunStatus } from "../storage/types.js";

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
}
