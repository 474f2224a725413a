import {
  authenticateRequest,
  checkSignedRequest,
  conversationOrDetail,
  type IncomingRequest,
  isDetailReply,
  json,
  liveChatView,
  type Reply,
  type ServiceContext,
} from "../../plugin/api.js";

/**
 * `POST /public/v1/api/conversations/{conversation_id}/livechat/cancel`: the user leaves the
 * queue or ends the live chat (`livechat_cancelled`); the provider is told, and the user's
 * next message goes to the bot. The checks of history; 409 `livechat_conflict` when no live
 * chat is waiting or active; on a channel that requires signatures, the signature of its
 * (empty) body, as execute's. Answers the conversation's live chat as it is now.
 */
export async function cancelLiveChat(request: IncomingRequest, conversationId: string, ctx: ServiceContext): Promise<Reply> {
  const { channel } = await authenticateRequest(request, ctx);
  await checkSignedRequest(request, channel, ctx);
  const conversation = await conversationOrDetail(ctx.storage, channel, conversationId);
  if (isDetailReply(conversation)) return conversation;
  const state = await ctx.livechat.cancel(conversation.id, channel.tenantId);
  return json({ conversation_id: conversation.id, ...liveChatView(state) });
}
