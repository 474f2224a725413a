import type { ServiceContext } from "../../context.js";
import { preflight, SIGNED_HEADERS } from "../../http/cors.js";
import type { Route } from "../../http/router.js";
import { chat } from "./chat.js";
import { config } from "./config.js";
import { cancelChatRun, resumeChatStream } from "../../streams/routes.js";

const CONFIG_PATH = "/public/widget/config";
const CHAT_PATH = "/public/widget/chat";
const CHAT_STREAM_PATH = "/public/widget/chat/:chat_id/stream";
const CHAT_CANCEL_PATH = "/public/widget/chat/:chat_id/cancel";

/**
 * The widget channel: a chat widget's configuration and its streamed chat, for publishable
 * keys in browsers. Built in, like the API channel; its channels are API channels in
 * public mode.
 */
export function widgetChannel(): { name: string; routes: Route<ServiceContext>[] } {
  return {
    name: "widget-channel",
    routes: [
      { method: "OPTIONS", path: CONFIG_PATH, handle: () => preflight("GET, OPTIONS") },
      { method: "GET", path: CONFIG_PATH, handle: (request, _params, ctx) => config(request, ctx) },
      // The chat and its cancel take a signature on a channel that requires one.
      { method: "OPTIONS", path: CHAT_PATH, handle: () => preflight("POST, OPTIONS", SIGNED_HEADERS) },
      { method: "POST", path: CHAT_PATH, handle: (request, _params, ctx) => chat(request, ctx) },
      // Resumable streams, where the AI SDK's transport reconnects (docs/streaming.md).
      { method: "OPTIONS", path: CHAT_STREAM_PATH, handle: () => preflight("GET, OPTIONS") },
      { method: "GET", path: CHAT_STREAM_PATH, handle: (request, params, ctx) => resumeChatStream(request, params.chat_id as string, ctx) },
      { method: "OPTIONS", path: CHAT_CANCEL_PATH, handle: () => preflight("POST, OPTIONS", SIGNED_HEADERS) },
      { method: "POST", path: CHAT_CANCEL_PATH, handle: (request, params, ctx) => cancelChatRun(request, params.chat_id as string, ctx) },
    ],
  };
}
