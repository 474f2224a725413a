import { feedRoute } from "./feed.js";
import { acceptRoute, closeRoute, listRoute, sendRoute, showRoute } from "./routes.js";
import { inboxConversationQuerySchema, inboxListQuerySchema } from "./schemas.js";
import {
  type AdminAuthenticate,
  adminAuthenticator,
  type AdminAuthOptions,
  agentMessageSchema,
  defineRoute,
  type LiveChatProvider,
  routeDocs,
} from "../../plugin/api.js";

const BASE = "/api/v1/livechat";
const CONVERSATIONS = `${BASE}/conversations` as const;
const CONVERSATION = `${CONVERSATIONS}/:conversation_id` as const;
/** An agent console in a browser sends the admin token and the tenant. */
const INBOX_CORS = { headers: ["Authorization", "Content-Type", "X-Tenant-ID", "Last-Event-ID"] };

/**
 * The built-in live-chat provider: a queue per tenant that its agents work through HTTP
 * routes behind the tenant admin JWT (the same tokens and `X-Tenant-ID` as `adminApi()`):
 *
 * - `GET /api/v1/livechat/conversations?mode=waiting|active|all`: the live chats;
 * - `GET /api/v1/livechat/conversations/{id}`: one, with its recent messages;
 * - `POST /api/v1/livechat/conversations/{id}/accept`, `/messages` (`{ content, sender? }`), `/close`;
 * - `GET /api/v1/livechat/feed`: server-sent events of handovers, messages and mode changes.
 *
 * A handover always waits for an agent here (it is never `livechat_unavailable`); it
 * expires after the channel's wait timeout.
 *
 * @example
 * const service = await createChannelService({
 *   storage,
 *   flows,
 *   livechat: liveChatInbox({ secret: process.env.CHANNELKIT_ADMIN_JWT_SECRET }),
 * });
 */
export function liveChatInbox(options: AdminAuthOptions = {}): LiveChatProvider {
  let authenticate: AdminAuthenticate = () => {
    throw new Error("channelkit: liveChatInbox() was not started: pass it as createChannelService({ livechat: liveChatInbox(...) })");
  };
  return {
    id: "livechat-inbox",
    init(ctx) {
      authenticate = adminAuthenticator(options, ctx.production, ctx.logger);
    },
    routes: [
      defineRoute({
        method: "GET",
        path: CONVERSATIONS,
        auth: "admin",
        cors: INBOX_CORS,
        query: inboxListQuerySchema,
        doc: {
          operationId: "listLiveChats",
          summary: "List the live chats",
          description: "The tenant's waiting and active live chats, longest waiting first. Any other query parameter is a 422.",
          tag: "inbox",
          responses: { 200: { description: "The live chats.", json: "InboxList" } },
          errors: [...routeDocs.ADMIN, "validation_error"],
        },
        handle: (call, ctx) => listRoute(call, ctx, authenticate),
      }),
      defineRoute({
        method: "GET",
        path: CONVERSATION,
        auth: "admin",
        cors: INBOX_CORS,
        query: inboxConversationQuerySchema,
        doc: {
          operationId: "getLiveChat",
          summary: "Read a live chat",
          description: "One conversation of the tenant, with its recent messages.",
          tag: "inbox",
          parameters: [routeDocs.CONVERSATION_ID],
          responses: { 200: { description: "The conversation and its recent messages.", json: "InboxConversationResponse" } },
          errors: [...routeDocs.ADMIN, "validation_error", "conversation_not_found"],
        },
        handle: (call, ctx) => showRoute(call, call.params.conversation_id, ctx, authenticate),
      }),
      defineRoute({
        method: "POST",
        path: `${CONVERSATION}/accept` as const,
        auth: "admin",
        cors: INBOX_CORS,
        doc: {
          operationId: "acceptLiveChat",
          summary: "Accept a waiting live chat",
          description: "The agent takes the conversation (`livechat_active`). The body may be left out.",
          tag: "inbox",
          parameters: [routeDocs.CONVERSATION_ID],
          body: { component: "AcceptRequest", required: false },
          responses: { 200: { description: "The conversation as it is now.", json: "InboxConversationOnly" } },
          errors: [...routeDocs.ADMIN, ...routeDocs.JSON_BODY, "conversation_not_found", "livechat_conflict"],
        },
        handle: ({ request, params }, ctx) => acceptRoute(request, params.conversation_id, ctx, authenticate),
      }),
      defineRoute({
        method: "POST",
        path: `${CONVERSATION}/messages` as const,
        auth: "admin",
        cors: INBOX_CORS,
        body: agentMessageSchema,
        doc: {
          operationId: "sendLiveChatMessage",
          summary: "Write to the user",
          description: "Stored with the next turn index while the live chat waits or is active; a `livechat_message_id` already stored is not stored twice.",
          tag: "inbox",
          parameters: [routeDocs.CONVERSATION_ID],
          body: { component: "AgentMessageRequest", required: true },
          responses: { 200: { description: "The message as stored.", json: "AgentMessageResponse" } },
          errors: [...routeDocs.ADMIN, ...routeDocs.JSON_BODY, "conversation_not_found", "livechat_conflict"],
        },
        handle: ({ request, params }, ctx) => sendRoute(request, params.conversation_id, ctx, authenticate),
      }),
      defineRoute({
        method: "POST",
        path: `${CONVERSATION}/close` as const,
        auth: "admin",
        cors: INBOX_CORS,
        doc: {
          operationId: "closeLiveChat",
          summary: "Close a live chat",
          description: "The agent ends the live chat (`livechat_closed`); the bot takes the next message. No body.",
          tag: "inbox",
          parameters: [routeDocs.CONVERSATION_ID],
          responses: { 200: { description: "The conversation as it is now.", json: "InboxConversationOnly" } },
          errors: [...routeDocs.ADMIN, "conversation_not_found", "livechat_conflict"],
        },
        handle: ({ request, params }, ctx) => closeRoute(request, params.conversation_id, ctx, authenticate),
      }),
      defineRoute({
        method: "GET",
        path: `${BASE}/feed`,
        auth: "admin",
        cors: INBOX_CORS,
        doc: {
          operationId: "liveChatFeed",
          summary: "Follow the tenant's live chats",
          description: "Server-sent events from every instance, until the client leaves (a comment every 15 s keeps it open).",
          tag: "inbox",
          responses: {
            200: {
              description: "The feed.",
              sse: "InboxFeedStreamEvent",
              headers: ["Cache-Control-Stream", "X-Accel-Buffering"],
              optionalHeaders: routeDocs.HOP_BY_HOP,
            },
          },
          errors: [...routeDocs.ADMIN, ...routeDocs.STREAMED],
        },
        handle: ({ request }, ctx) => feedRoute(request, ctx, authenticate),
      }),
    ],
  };
}
