import {
  authenticateRequest,
  conversationOrDetail,
  fitTokenBudget,
  isDetailReply,
  json,
  liveChatView,
  messageView,
  type Reply,
  type RouteCall,
  type ServiceContext,
} from "../../plugin/api.js";
import type { z } from "zod";
import type { historyQuerySchema } from "./schemas.js";

/**
 * The channel types whose keys read history here: `api`, and the plugins' types that say so
 * (undefined when none does: `api` alone, with the contract's message).
 */
const readers = new WeakMap<ServiceContext["plugins"], { types: readonly string[] | undefined }>();
function historyTypes(ctx: ServiceContext): readonly string[] | undefined {
  let known = readers.get(ctx.plugins);
  if (known === undefined) {
    const plugins = [...ctx.plugins.channelTypes.values()].filter((type) => type.history === true).map((type) => type.name);
    known = { types: plugins.length === 0 ? undefined : ["api", ...plugins] };
    readers.set(ctx.plugins, known);
  }
  return known.types;
}

type HistoryPath = "/public/v1/api/conversations/:session_id/messages";
type HistoryQuery = z.output<typeof historyQuerySchema>;

/** `GET /public/v1/api/conversations/{session_id}/messages`: the conversation's history. */
export async function history(call: RouteCall<HistoryPath, HistoryQuery>, ctx: ServiceContext): Promise<Reply> {
  const { request } = call;
  const sessionId = call.params.session_id;
  const { channel } = await authenticateRequest(request, ctx, { channelTypes: historyTypes(ctx) });
  const query = call.query();

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
