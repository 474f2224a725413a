import type { ServiceContext } from "../../context.js";
import { preflight } from "../../http/cors.js";
import type { Route } from "../../http/router.js";
import { chat } from "./chat.js";
import { config } from "./config.js";

const CONFIG_PATH = "/public/widget/config";
const CHAT_PATH = "/public/widget/chat";

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
      { method: "OPTIONS", path: CHAT_PATH, handle: () => preflight("POST, OPTIONS") },
      { method: "POST", path: CHAT_PATH, handle: (request, _params, ctx) => chat(request, ctx) },
    ],
  };
}
