import { chat } from "./chat.js";
import { config } from "./config.js";
import { widgetConfigQuerySchema } from "./schemas.js";
import { cancelChatRun, type ChannelPlugin, defineRoute, resumeChatStream, routeDocs } from "../../plugin/api.js";

const CHAT = "/public/widget/chat" as const;
/** What a browser sends with a publishable key. */
const KEYED = { headers: ["Authorization", "Content-Type"] };
/** The chat and its cancel take a signature on a channel that requires one: a browser may send it. */
const SIGNED = { headers: ["Authorization", "Content-Type", "X-Service-Signature"] };

/**
 * The widget channel: a chat widget's configuration and its streamed chat, for publishable
 * keys in browsers. Built in, like the API channel; its channels are API channels in
 * public mode.
 */
export function widgetChannel(): ChannelPlugin {
  return {
    id: "widget",
    routes: [
      defineRoute({
        method: "GET",
        path: "/public/widget/config",
        auth: "publishableKey",
        cors: KEYED,
        query: widgetConfigQuerySchema,
        doc: {
          operationId: "getWidgetConfig",
          summary: "Read the widget's configuration",
          description:
            "In the requested locale when the channel has it, else the best match of `Accept-Language`, else the channel's first language. Never cached.",
          tag: "widget",
          parameters: [
            { name: "Accept-Language", in: "header", description: "The browser's languages, when `locale` is absent or not the channel's." },
            routeDocs.ORIGIN,
          ],
          responses: { 200: { description: "The widget's configuration.", json: "WidgetConfig", headers: ["Cache-Control-No-Store"] } },
          errors: [...routeDocs.PUBLISHABLE_KEY, "validation_error"],
        },
        handle: (call, ctx) => config(call, ctx),
      }),
      defineRoute({
        method: "POST",
        path: CHAT,
        auth: "publishableKey",
        cors: SIGNED,
        doc: {
          operationId: "widgetChat",
          summary: "Chat through the widget",
          description: "Runs the flow on the user's message and always streams, with execute's protocol and checks (in its order), publishable keys only.",
          tag: "widget",
          parameters: [routeDocs.ORIGIN, routeDocs.SIGNATURE_HEADER],
          body: { component: "WidgetChatRequest", required: true },
          responses: {
            200: {
              description: "The run as a stream of server-sent events.",
              sse: "UIMessageStreamEvent",
              headers: routeDocs.STREAM_HEADERS,
              optionalHeaders: routeDocs.HOP_BY_HOP,
            },
          },
          errors: [
            ...routeDocs.PUBLISHABLE_KEY,
            ...routeDocs.JSON_BODY,
            ...routeDocs.SIGNATURE,
            "conversation_not_found",
            "conversation_forbidden",
            "flow_unavailable",
            "conversation_busy",
            ...routeDocs.STREAMED,
          ],
        },
        handle: ({ request }, ctx) => chat(request, ctx),
      }),
      // Resumable streams, where the AI SDK's transport reconnects (docs/streaming.md).
      defineRoute({
        method: "GET",
        path: `${CHAT}/:chat_id/stream` as const,
        auth: "publishableKey",
        cors: KEYED,
        doc: {
          operationId: "resumeWidgetChatStream",
          summary: "Follow a widget chat's run in flight",
          description: "Where `useChat({ resume: true })` reconnects: the conversation stream route for a chat id, publishable keys only.",
          tag: "widget",
          parameters: [routeDocs.CHAT_ID, routeDocs.ORIGIN],
          responses: routeDocs.RESUME_RESPONSES,
          errors: [...routeDocs.PUBLISHABLE_KEY, ...routeDocs.STREAMED],
          detailNotFound: true,
        },
        handle: ({ request, params }, ctx) => resumeChatStream(request, params.chat_id, ctx),
      }),
      defineRoute({
        method: "POST",
        path: `${CHAT}/:chat_id/cancel` as const,
        auth: "publishableKey",
        cors: SIGNED,
        doc: {
          operationId: "cancelWidgetChatRun",
          summary: "Stop a widget chat's run in flight",
          description:
            "The conversation cancel route for a chat id, publishable keys only. No body: on a channel with `require_signature`, `X-Service-Signature` is computed over the empty body.",
          tag: "widget",
          parameters: [routeDocs.CHAT_ID, routeDocs.ORIGIN, routeDocs.SIGNATURE_HEADER],
          responses: routeDocs.CANCEL_RESPONSES,
          errors: [...routeDocs.PUBLISHABLE_KEY, ...routeDocs.SIGNATURE],
          detailNotFound: true,
        },
        handle: ({ request, params }, ctx) => cancelChatRun(request, params.chat_id, ctx),
      }),
    ],
  };
}
