import type { ChannelPlugin } from "../../plugin/plugin.js";
import { defineRoute } from "../../plugin/route.js";
import {
  CANCEL_RESPONSES,
  CHAT_ID,
  HOP_BY_HOP,
  JSON_BODY,
  ORIGIN,
  PUBLISHABLE_KEY,
  RESUME_RESPONSES,
  SIGNATURE,
  SIGNATURE_HEADER,
  STREAM_HEADERS,
  STREAMED,
} from "../../openapi/common.js";
import { cancelChatRun, resumeChatStream } from "../../streams/routes.js";
import { chat } from "./chat.js";
import { config } from "./config.js";
import { widgetConfigQuerySchema } from "./schemas.js";

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
        rateLimited: true,
        doc: {
          operationId: "getWidgetConfig",
          summary: "Read the widget's configuration",
          description:
            "In the requested locale when the channel has it, else the best match of `Accept-Language`, else the channel's first language. Never cached.",
          tag: "widget",
          parameters: [
            { name: "Accept-Language", in: "header", description: "The browser's languages, when `locale` is absent or not the channel's." },
            ORIGIN,
          ],
          responses: { 200: { description: "The widget's configuration.", json: "WidgetConfig", headers: ["Cache-Control-No-Store"] } },
          errors: [...PUBLISHABLE_KEY, "validation_error"],
        },
        handle: (call, ctx) => config(call, ctx),
      }),
      defineRoute({
        method: "POST",
        path: CHAT,
        auth: "publishableKey",
        cors: SIGNED,
        rateLimited: true,
        doc: {
          operationId: "widgetChat",
          summary: "Chat through the widget",
          description: "Runs the flow on the user's message and always streams, with execute's protocol and checks (in its order), publishable keys only.",
          tag: "widget",
          parameters: [ORIGIN, SIGNATURE_HEADER],
          body: { component: "WidgetChatRequest", required: true },
          responses: {
            200: {
              description: "The run as a stream of server-sent events.",
              sse: "UIMessageStreamEvent",
              headers: STREAM_HEADERS,
              optionalHeaders: HOP_BY_HOP,
            },
          },
          errors: [
            ...PUBLISHABLE_KEY,
            ...JSON_BODY,
            ...SIGNATURE,
            "conversation_not_found",
            "conversation_forbidden",
            "flow_unavailable",
            "conversation_busy",
            ...STREAMED,
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
        rateLimited: true,
        doc: {
          operationId: "resumeWidgetChatStream",
          summary: "Follow a widget chat's run in flight",
          description: "Where `useChat({ resume: true })` reconnects: the conversation stream route for a chat id, publishable keys only.",
          tag: "widget",
          parameters: [CHAT_ID, ORIGIN],
          responses: RESUME_RESPONSES,
          errors: [...PUBLISHABLE_KEY, ...STREAMED],
          detailNotFound: true,
        },
        handle: ({ request, params }, ctx) => resumeChatStream(request, params.chat_id, ctx),
      }),
      defineRoute({
        method: "POST",
        path: `${CHAT}/:chat_id/cancel` as const,
        auth: "publishableKey",
        cors: SIGNED,
        rateLimited: true,
        doc: {
          operationId: "cancelWidgetChatRun",
          summary: "Stop a widget chat's run in flight",
          description:
            "The conversation cancel route for a chat id, publishable keys only. No body: on a channel with `require_signature`, `X-Service-Signature` is computed over the empty body.",
          tag: "widget",
          parameters: [CHAT_ID, ORIGIN, SIGNATURE_HEADER],
          responses: CANCEL_RESPONSES,
          errors: [...PUBLISHABLE_KEY, ...SIGNATURE],
          detailNotFound: true,
        },
        handle: ({ request, params }, ctx) => cancelChatRun(request, params.chat_id, ctx),
      }),
    ],
  };
}
