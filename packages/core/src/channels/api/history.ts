import { authenticateApiKey } from "../../auth/authenticate.js";
import type { ServiceContext } from "../../context.js";
import { fitTokenBudget } from "../../conversations/window.js";
import { ServiceError } from "../../http/errors.js";
import type { IncomingRequest, Reply } from "../../http/reply.js";
import { json } from "../../http/respond.js";
import { validate } from "../../http/validate.js";
import type { ConversationRecord, MessageRecord } from "../../storage/types.js";
import { findOwnConversation } from "./conversation.js";
import { historyQuerySchema } from "./schemas.js";

/** `GET /public/v1/api/conversations/{session_id}/messages`: the conversation's history. */
export async function history(request: IncomingRequest, sessionId: string, ctx: ServiceContext): Promise<Reply> {
  const { channel } = await authenticateApiKey(request, ctx.storage, new Date());
  const params = new URL(request.url).searchParams;
  const query = validate(historyQuerySchema, {
    limit: params.get("limit") ?? undefined,
    token_budget: params.get("token_budget") ?? undefined,
  });

  let conversation: ConversationRecord;
  try {
    conversation = await findOwnConversation(ctx.storage, channel, sessionId);
  } catch (error) {
    if (error instanceof ServiceError && error.status < 500) {
      // The contract keeps this route's 404 in the framework's `{ detail }` format.
      return json({ detail: `No conversation found for session id ${sessionId}` }, 404);
    }
    throw error;
  }

  const recent = await ctx.storage.listRecentMessages(conversation.id, query.limit);
  const messages = fitTokenBudget(recent, query.token_budget);
  return json({
    session_id: sessionId,
    messages: messages.map(historyEntry),
    total_messages: messages.length,
    total_tokens: messages.reduce((sum, message) => sum + message.tokenCount, 0),
    mode: conversation.mode,
    livechat_status_message: channel.livechatMessages[conversation.mode] ?? null,
    livechat_conversation_id: conversation.livechatConversationId,
  });
}

function historyEntry(message: MessageRecord) {
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
