import type { z } from "zod";
import { acceptBodySchema, type inboxConversationQuerySchema, type inboxListQuerySchema } from "./schemas.js";
import { inboxConversationView } from "./views.js";
import {
  type AdminAuthenticate,
  adminRequest,
  agentMessageSchema,
  type ChannelRecord,
  type ConversationMode,
  type ConversationRecord,
  jsonResponse,
  messageView,
  parseJson,
  readRawBody,
  requireJsonContentType,
  type RouteCall,
  type RouteRequest,
  type ServiceContext,
  ServiceError,
  validate,
} from "../../plugin/api.js";

type InboxListQuery = z.output<typeof inboxListQuerySchema>;
type InboxConversationQuery = z.output<typeof inboxConversationQuerySchema>;

const LISTED: Record<"waiting" | "active" | "all", ConversationMode[]> = {
  waiting: ["livechat_waiting"],
  active: ["livechat_active"],
  all: ["livechat_waiting", "livechat_active"],
};

/** `GET /api/v1/livechat/conversations?mode=waiting|active|all&limit=`: the tenant's live chats, longest waiting first. */
export async function listRoute(call: RouteCall<string, InboxListQuery>, ctx: ServiceContext, authenticate: AdminAuthenticate): Promise<Response> {
  const { caller } = await adminRequest(call.request, ctx, authenticate);
  // The route's strict schema: a parameter it does not know is a 422.
  const query = call.query();
  const stored = await ctx.storage.listLiveChatConversations({ tenantId: caller.tenantId, modes: LISTED[query.mode], limit: query.limit });
  const channels = channelsOf(ctx);
  const conversations = [];
  for (const conversation of stored) {
    const view = inboxConversationView(ctx.livechat, await channels(conversation.channelId), conversation);
    // A wait that expired is not written until something happens: it is no longer listed.
    if (view.mode === "livechat_waiting" || view.mode === "livechat_active") conversations.push(view);
  }
  return jsonResponse({ conversations });
}

/** `GET /api/v1/livechat/conversations/{id}?limit=`: one conversation of the tenant with its recent messages. */
export async function showRoute(
  call: RouteCall<string, InboxConversationQuery>,
  conversationId: string,
  ctx: ServiceContext,
  authenticate: AdminAuthenticate,
): Promise<Response> {
  const { caller } = await adminRequest(call.request, ctx, authenticate);
  const query = call.query();
  const conversation = await tenantConversation(ctx, caller.tenantId, conversationId);
  const messages = await ctx.storage.listRecentMessages(conversation.id, query.limit);
  const channel = await ctx.storage.findChannel(conversation.channelId);
  return jsonResponse({ conversation: inboxConversationView(ctx.livechat, channel, conversation), messages: messages.map(messageView) });
}

/** `POST /api/v1/livechat/conversations/{id}/accept`: the agent takes a waiting conversation. */
export async function acceptRoute(request: RouteRequest, conversationId: string, ctx: ServiceContext, authenticate: AdminAuthenticate): Promise<Response> {
  const { caller } = await adminRequest(request, ctx, authenticate);
  const body = validate(acceptBodySchema, await optionalJson(request, ctx));
  await ctx.livechat.accept(conversationId, {
    tenantId: caller.tenantId,
    ...(body.livechat_conversation_id === undefined ? {} : { livechatConversationId: body.livechat_conversation_id }),
  });
  return conversationResponse(ctx, conversationId);
}

/** `POST /api/v1/livechat/conversations/{id}/messages`: the agent writes to the user. */
export async function sendRoute(request: RouteRequest, conversationId: string, ctx: ServiceContext, authenticate: AdminAuthenticate): Promise<Response> {
  const { caller } = await adminRequest(request, ctx, authenticate);
  requireJsonContentType(request);
  const input = validate(agentMessageSchema, parseJson(await readRawBody(request, ctx.maxBodyBytes)));
  const message = await ctx.livechat.send(conversationId, input, { tenantId: caller.tenantId });
  return jsonResponse({ message });
}

/** `POST /api/v1/livechat/conversations/{id}/close`: the agent ends the live chat; the bot takes the next message. */
export async function closeRoute(request: RouteRequest, conversationId: string, ctx: ServiceContext, authenticate: AdminAuthenticate): Promise<Response> {
  const { caller } = await adminRequest(request, ctx, authenticate);
  await ctx.livechat.close(conversationId, { tenantId: caller.tenantId });
  return conversationResponse(ctx, conversationId);
}

async function conversationResponse(ctx: ServiceContext, conversationId: string): Promise<Response> {
  const conversation = await ctx.storage.findConversation(conversationId);
  if (!conversation) throw new ServiceError("conversation_not_found");
  const channel = await ctx.storage.findChannel(conversation.channelId);
  return jsonResponse({ conversation: inboxConversationView(ctx.livechat, channel, conversation) });
}

/** A conversation of the tenant; another tenant's is as unknown as one that does not exist. */
export async function tenantConversation(ctx: ServiceContext, tenantId: string, conversationId: string): Promise<ConversationRecord> {
  const conversation = await ctx.storage.findConversation(conversationId);
  if (!conversation || conversation.tenantId !== tenantId) throw new ServiceError("conversation_not_found");
  return conversation;
}

/** Channels by id, each read once per request. */
export function channelsOf(ctx: ServiceContext): (id: string) => Promise<ChannelRecord | null> {
  const read = new Map<string, Promise<ChannelRecord | null>>();
  return (id) => {
    let channel = read.get(id);
    if (!channel) {
      channel = ctx.storage.findChannel(id);
      read.set(id, channel);
    }
    return channel;
  };
}

/** A JSON body that may be left out (`{}` then); when sent, it is JSON. */
async function optionalJson(request: RouteRequest, ctx: ServiceContext): Promise<unknown> {
  const bytes = await readRawBody(request, ctx.maxBodyBytes);
  if (bytes.length === 0) return {};
  requireJsonContentType(request);
  return parseJson(bytes);
}
