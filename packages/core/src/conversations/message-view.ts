import type { MessageRecord } from "../storage/types.js";

/** A stored message as the contract shows it: history, the live-chat subscription and providers all use this shape. */
export function messageView(message: MessageRecord) {
  return {
    origin: message.origin,
    role: message.role,
    content: message.content,
    timestamp: message.timestamp,
    turn_index: message.turnIndex,
    token_count: message.tokenCount,
    run_id: message.runId,
    step_id: message.stepId,
    node_type: message.nodeType,
    tool_calls: message.toolCalls,
    tool_call_id: message.toolCallId,
    livechat_message_id: message.livechatMessageId,
    sender: message.sender,
  };
}

/** The JSON shape of {@link messageView}. */
export type MessageView = ReturnType<typeof messageView>;
