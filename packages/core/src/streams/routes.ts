import { authenticateRequest } from "../auth/authenticate.js";
import { checkSignedRequest } from "../auth/channel-signature.js";
import { conversationOrDetail, isDetailReply } from "../conversations/own.js";
import { canonicalId } from "../storage/records.js";
import type { ServiceContext } from "../context.js";
import { externalConversationId } from "../runs/external-key.js";
import type { IncomingRequest, Reply } from "../http/reply.js";
import { json } from "../http/respond.js";
import type { ChannelRecord, ConversationRecord } from "../storage/types.js";

/**
 * `GET /public/v1/api/conversations/{conversation_id}/stream`: the whole stream of the
 * conversation's run in flight, from its first event, then the rest live; 204 when none is.
 * The checks of history, its 404 included.
 */
export async function resumeConversationStream(request: IncomingRequest, conversationId: string, ctx: ServiceContext): Promise<Reply> {
  const found = await authenticateRequest(request, ctx);
  const conversation = await conversationOrDetail(ctx.storage, found.channel, conversationId);
  if (isDetailReply(conversation)) return conversation;
  return ctx.openStreams.forKey(request, found, () => ctx.streams.resume(conversation.id));
}

/**
 * `POST /public/v1/api/conversations/{conversation_id}/cancel`: stops the conversation's run
 * in flight, on whichever instance runs it. The checks of history, and on a channel that
 * requires signatures, the signature of its (empty) body, as execute's.
 */
export async function cancelConversationRun(request: IncomingRequest, conversationId: string, ctx: ServiceContext): Promise<Reply> {
  const { channel } = await authenticateRequest(request, ctx);
  await checkSignedRequest(request, channel, ctx);
  const conversation = await conversationOrDetail(ctx.storage, channel, conversationId);
  if (isDetailReply(conversation)) return conversation;
  return cancelled(conversation.id, ctx);
}

/**
 * `GET /public/widget/chat/{chatId}/stream`, where the AI SDK's `DefaultChatTransport`
 * reconnects (`useChat({ resume: true })`): {@link resumeConversationStream} for the chat's
 * conversation, with publishable keys only; 204 for a chat that has no conversation yet.
 */
export async function resumeChatStream(request: IncomingRequest, chatId: string, ctx: ServiceContext): Promise<Reply> {
  const found = await authenticateRequest(request, ctx, { publicKeyOnly: true });
  const conversation = await chatConversation(chatId, found.channel, ctx);
  if (conversation === null) return NO_CONTENT();
  if (isDetailReply(conversation)) return conversation;
  return ctx.openStreams.forKey(request, found, () => ctx.streams.resume(conversation.id));
}

/** `POST /public/widget/chat/{chatId}/cancel`: {@link cancelConversationRun} for the chat's conversation. */
export async function cancelChatRun(request: IncomingRequest, chatId: string, ctx: ServiceContext): Promise<Reply> {
  const { channel } = await authenticateRequest(request, ctx, { publicKeyOnly: true });
  await checkSignedRequest(request, channel, ctx);
  const conversation = await chatConversation(chatId, channel, ctx);
  if (conversation === null) return NO_CONTENT();
  if (isDetailReply(conversation)) return conversation;
  return cancelled(conversation.id, ctx);
}

/**
 * Stops the run in flight and answers what was stored: 200 `{ run_id, conversation_id,
 * status }` once it is stored (`cancelled`, or how it ended if it ended first), 202 with
 * `status: "cancelling"` when it is not stored within the wait, 204 when nothing runs.
 */
async function cancelled(conversationId: string, ctx: ServiceContext): Promise<Reply> {
  const stopped = await ctx.streams.cancel(conversationId);
  if (!stopped) return NO_CONTENT();
  const run = stopped.ended ? await ctx.storage.findRun(stopped.runId) : null;
  const status = run && run.status !== "running" ? run.status : "cancelling";
  return json({ run_id: stopped.runId, conversation_id: conversationId, status }, status === "cancelling" ? 202 : 200);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The conversation of a widget chat id, as `POST /public/widget/chat` binds it: the
 * conversation with that id when it is one of this channel's (a 404 as on history when it
 * is another channel's or tenant's), else the one derived from the chat id, or null when it
 * has none yet.
 */
async function chatConversation(chatId: string, channel: ChannelRecord, ctx: ServiceContext): Promise<ConversationRecord | Reply | null> {
  if (UUID.test(chatId)) {
    const named = await ctx.storage.findConversation(canonicalId(chatId));
    if (named) return conversationOrDetail(ctx.storage, channel, named.id);
  }
  const derived = await ctx.storage.findConversation(await externalConversationId(channel, chatId));
  if (!derived) return null;
  return conversationOrDetail(ctx.storage, channel, derived.id);
}

const NO_CONTENT = (): Reply => ({ status: 204, headers: {}, body: null });
