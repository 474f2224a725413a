import { z } from "zod";
import { execute } from "./execute.js";
import { history } from "./history.js";
import { executeRequestSchema, historyQuerySchema } from "./schemas.js";
import { cancelConversationRun, type ChannelPlugin, defineRoute, resumeConversationStream, routeDocs } from "../../plugin/api.js";
import { conversationEvents } from "./events.js";
import { cancelLiveChat } from "./livechat-cancel.js";

const CONVERSATION = "/public/v1/api/conversations/:session_id" as const;
/** What a browser sends with a channel key. */
const KEYED = { headers: ["Authorization", "Content-Type"] };
/** The cancels take a signature on a channel that requires one: a browser may send it. */
const SIGNED = { headers: ["Authorization", "Content-Type", "X-Service-Signature"] };

/**
 * The API channel: execute, the conversation's history, and beside them the live chat's
 * subscription and cancel and the resumable stream's follow and cancel.
 */
export function apiChannel(): ChannelPlugin {
  return {
    id: "api",
    routes: [
      defineRoute({
        method: "POST",
        path: "/public/v1/api/execute",
        auth: "channelKey",
        // Idempotency-Key and X-Service-Signature only when the browser asks for them
        // (@channelkit/client sends a key; our extension, docs/api.md): the contract's answer otherwise.
        cors: { headers: KEYED.headers, optionalHeaders: ["Idempotency-Key", "X-Service-Signature"] },
        body: executeRequestSchema,
        doc: {
          operationId: "execute",
          summary: "Run the channel's flow",
          description:
            "Runs the flow bound to the key's channel and answers the run as JSON, or streams it (the AI SDK UI message stream) when `stream` is true, or when absent and the channel's `default_stream` is. An error before the first byte is an HTTP error; after it, an `error` event ends the stream. Checks, first failure wins: the key, the channel type, its state, the environment, the origin, the media type, the size, the signature, the body, the conversation.",
          tag: "api",
          parameters: [routeDocs.ORIGIN, routeDocs.SIGNATURE_HEADER, routeDocs.IDEMPOTENCY_KEY_HEADER],
          body: { component: "ExecuteRequest", required: true },
          responses: {
            200: {
              description:
                "The run: as JSON (`stream` false), or as a stream of server-sent events. With an `Idempotency-Key` already answered, that answer again, the stream's events all at once.",
              json: "RunDocument",
              sse: "UIMessageStreamEvent",
              optionalHeaders: [...routeDocs.STREAM_HEADERS, ...routeDocs.HOP_BY_HOP, "Idempotent-Replayed"],
            },
          },
          errors: [
            ...routeDocs.CHANNEL_KEY,
            ...routeDocs.JSON_BODY,
            ...routeDocs.SIGNATURE,
            "conversation_not_found",
            "conversation_forbidden",
            ...routeDocs.IDEMPOTENCY,
            "flow_unavailable",
            "conversation_busy",
            ...routeDocs.STREAMED,
          ],
        },
        handle: ({ request }, ctx) => execute(request, ctx),
      }),
      defineRoute({
        method: "GET",
        path: `${CONVERSATION}/messages` as const,
        auth: "channelKey",
        // Browsers reading history with a publishable key send a preflight too.
        cors: KEYED,
        query: historyQuerySchema,
        doc: {
          operationId: "getHistory",
          summary: "Read a conversation's history",
          description:
            "`limit` keeps the most recent messages, returned oldest first; `token_budget` then keeps the most recent of those whose summed `token_count` fits. Never a signature. A conversation that does not exist, or is another channel's or tenant's, is a 404 in the `{ detail }` format.",
          tag: "api",
          parameters: [routeDocs.SESSION_ID, routeDocs.ORIGIN],
          responses: { 200: { description: "The history.", json: "HistoryResponse" } },
          errors: [...routeDocs.CHANNEL_KEY, "validation_error"],
          detailNotFound: true,
        },
        handle: (call, ctx) => history(call, ctx),
      }),
      defineRoute({
        method: "GET",
        path: `${CONVERSATION}/events` as const,
        auth: "channelKey",
        cors: { headers: [...KEYED.headers, "Last-Event-ID"] },
        doc: {
          operationId: "subscribeConversationEvents",
          summary: "Follow a conversation's live chat",
          description:
            "Server-sent events: the mode first, then each message of the live chat and each change of mode, until the client leaves (a comment every 15 s keeps it open). The checks of history.",
          tag: "livechat",
          parameters: [
            routeDocs.SESSION_ID,
            {
              name: "after",
              in: "query",
              description: "Replays the live-chat messages after this turn index (-1: all); without it (or `Last-Event-ID`) the stream starts from now.",
              schema: z.int().min(-1),
            },
            { name: "Last-Event-ID", in: "header", description: "What a reconnecting `EventSource` sends: as `after`.", schema: z.string().regex(/^-?\d+$/) },
            routeDocs.ORIGIN,
          ],
          responses: {
            200: {
              description: "The live chat as server-sent events.",
              sse: "ConversationEventStreamEvent",
              headers: ["Cache-Control-Stream", "X-Accel-Buffering"],
              optionalHeaders: routeDocs.HOP_BY_HOP,
            },
          },
          errors: [...routeDocs.CHANNEL_KEY, "validation_error", ...routeDocs.STREAMED],
          detailNotFound: true,
        },
        handle: ({ request, params }, ctx) => conversationEvents(request, params.session_id, ctx),
      }),
      defineRoute({
        method: "POST",
        path: `${CONVERSATION}/livechat/cancel` as const,
        auth: "channelKey",
        cors: SIGNED,
        doc: {
          operationId: "cancelLiveChat",
          summary: "Leave the live chat",
          description:
            "The user leaves the queue or ends the live chat (`livechat_cancelled`); the provider is told, and the next message goes to the bot. The checks of history. No body: on a channel with `require_signature`, `X-Service-Signature` is computed over the empty body.",
          tag: "livechat",
          parameters: [routeDocs.SESSION_ID, routeDocs.ORIGIN, routeDocs.SIGNATURE_HEADER],
          responses: { 200: { description: "The conversation's live chat as it is now.", json: "LiveChatState" } },
          errors: [...routeDocs.CHANNEL_KEY, ...routeDocs.SIGNATURE, "livechat_conflict"],
          detailNotFound: true,
        },
        handle: ({ request, params }, ctx) => cancelLiveChat(request, params.session_id, ctx),
      }),
      defineRoute({
        method: "GET",
        path: `${CONVERSATION}/stream` as const,
        auth: "channelKey",
        cors: KEYED,
        doc: {
          operationId: "resumeConversationStream",
          summary: "Follow the run in flight",
          description: "The checks of history, its 404 included.",
          tag: "streams",
          parameters: [routeDocs.SESSION_ID, routeDocs.ORIGIN],
          responses: routeDocs.RESUME_RESPONSES,
          errors: [...routeDocs.CHANNEL_KEY, ...routeDocs.STREAMED],
          detailNotFound: true,
        },
        handle: ({ request, params }, ctx) => resumeConversationStream(request, params.session_id, ctx),
      }),
      defineRoute({
        method: "POST",
        path: `${CONVERSATION}/cancel` as const,
        auth: "channelKey",
        cors: SIGNED,
        doc: {
          operationId: "cancelConversationRun",
          summary: "Stop the run in flight",
          description:
            "Stops the conversation's run on whichever instance runs it; its streams end with `finish` and it is stored `cancelled`. The checks of history. No body: on a channel with `require_signature`, `X-Service-Signature` is computed over the empty body.",
          tag: "streams",
          parameters: [routeDocs.SESSION_ID, routeDocs.ORIGIN, routeDocs.SIGNATURE_HEADER],
          responses: routeDocs.CANCEL_RESPONSES,
          errors: [...routeDocs.CHANNEL_KEY, ...routeDocs.SIGNATURE],
          detailNotFound: true,
        },
        handle: ({ request, params }, ctx) => cancelConversationRun(request, params.session_id, ctx),
      }),
    ],
  };
}
