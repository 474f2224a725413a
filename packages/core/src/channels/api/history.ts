import { authenticateRequest } from "../../auth/authenticate.js";
import type { ServiceContext } from "../../context.js";
import { fitTokenBudget } from "../../conversations/window.js";
import type { IncomingRequest, Reply } from "../../http/reply.js";
import { json } from "../../http/respond.js";
import { validate } from "../../http/validate.js";
import { messageView } from "../../conversations/message-view.js";
import { liveChatView } from "../../livechat/view.js";
import { conversationOrDetail, isDetailReply } from "./conversation.js";
import { historyQuerySchema } from "./schemas.js";

/** `GET /public/v1/api/conversations/{session_id}/messages`: the conversation's history. */
export async function history(request: IncomingRequest, sessionId: string, ctx: ServiceContext): Promise<Reply> {
  const { channel } = await authenticateRequest(request, ctx);
  const params = new URL(request.url).searchParams;
  const query = validate(historyQuerySchema, {
    limit: params.get("limit") ?? undefined,
    token_budget: params.get("token_budget") ?? undefined,
  });

  // The contract keeps this route's 404 in the framework's `{ detail }` format.
  const conversation = await conversationOrDetail(ctx.storage, channel, sessionId);
  if (isDetailReply(conversation)) return conversation;

  const recent = await ctx.storage.listRecentMessages(conversation.id, query.limit);
  const messages = fitTokenBudget(recent, query.token_budget);
  return json({
    // interface.md: an echo of the path parameter, as the client wrote it (a UUID's case included).
    session_id: sessionId,
    messages: messages.map(messageView),
    total_messages: messages.length,
    total_tokens: messages.reduce((sum, message) => sum + message.tokenCount, 0),
    ...liveChatView(ctx.livechat.state(channel, conversation)),
  });
}
