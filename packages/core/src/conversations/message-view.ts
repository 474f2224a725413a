import { z } from "zod";
import type { MessageRecord } from "../storage/types.js";

/**
 * A stored message as the contract shows it: history, the live-chat subscription and providers
 * all use this shape. A run's ids are shown only on what a run produced (`origin: "agent"`,
 * interface.md): the user's message to a live chat keeps its run's id in the storage, which
 * the run's bookkeeping reads, but shows none.
 */
export function messageView(message: MessageRecord) {
  const byRun = message.origin === "agent";
  return {
    origin: message.origin,
    role: message.role,
    content: message.content,
    timestamp: message.timestamp,
    turn_index: message.turnIndex,
    token_count: message.tokenCount,
    run_id: byRun ? message.runId : null,
    step_id: byRun ? message.stepId : null,
    node_type: byRun ? message.nodeType : null,
    tool_calls: message.toolCalls,
    tool_call_id: message.toolCallId,
    livechat_message_id: message.livechatMessageId,
    sender: message.sender,
    // Only on a message that has any (a chat platform's ids): the contract's messages have none.
    ...(message.metadata === null ? {} : { metadata: message.metadata }),
  };
}

/** The JSON shape of {@link messageView}. */
export type MessageView = ReturnType<typeof messageView>;

/** A tool call on a stored message, in the service's format. */
export const toolCallSchema = z.object({
  id: z.string(),
  name: z.string(),
  arguments: z.unknown().meta({ description: "The call's arguments as the model gave them (usually an object)." }),
});

/** {@link messageView} as a schema: what history, the live-chat routes and the inbox answer for a message. */
export const messageViewSchema = z
  .object({
    origin: z.enum(["agent", "livechat"]).meta({ description: "`agent` (produced by a run) or `livechat` (the human side, or the user writing to it)." }),
    role: z.enum(["user", "assistant", "system", "tool"]),
    content: z.string(),
    timestamp: z.iso.datetime().meta({ description: "ISO 8601, UTC." }),
    turn_index: z.int().min(0).meta({ description: "Position in the conversation, from 0, contiguous." }),
    token_count: z.int().min(0).meta({ description: "Estimated tokens of the message." }),
    run_id: z.uuid().nullable().meta({ description: "Set only when `origin` is `agent`." }),
    step_id: z.string().nullable().meta({ description: "Set only when `origin` is `agent`." }),
    node_type: z.string().nullable().meta({ description: "The executing node's type, only when `origin` is `agent`." }),
    tool_calls: z.array(toolCallSchema).nullable(),
    tool_call_id: z.string().nullable().meta({ description: "The tool call a `tool` message answers." }),
    livechat_message_id: z.string().nullable().meta({ description: "Set only when `origin` is `livechat`." }),
    sender: z
      .enum(["user", "agent", "supervisor", "bot", "system"])
      .nullable()
      .meta({ description: "The raw live-chat sender, only when `origin` is `livechat`." }),
    metadata: z
      .record(z.string(), z.unknown())
      .optional()
      .meta({ description: "A channel's own data of the message, only on a message that has any: a chat platform's user, message and thread ids." }),
  })
  .meta({ description: "A message of a conversation, oldest first in every list." });
