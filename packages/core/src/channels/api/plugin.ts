import type { ServiceContext } from "../../context.js";
import type { Route } from "../../http/router.js";
import { preflight, SIGNED_HEADERS } from "../../http/cors.js";
import type { IncomingRequest, Reply } from "../../http/reply.js";
import { execute } from "./execute.js";
import { history } from "./history.js";
import { cancelLiveChat } from "../../livechat/cancel.js";
import { conversationEvents } from "../../livechat/subscription.js";
import { cancelConversationRun, resumeConversationStream } from "../../streams/routes.js";

const EXECUTE_PATH = "/public/v1/api/execute";
const HISTORY_PATH = "/public/v1/api/conversations/:session_id/messages";
const EVENTS_PATH = "/public/v1/api/conversations/:session_id/events";
const CANCEL_PATH = "/public/v1/api/conversations/:session_id/livechat/cancel";
const STREAM_PATH = "/public/v1/api/conversations/:session_id/stream";
const RUN_CANCEL_PATH = "/public/v1/api/conversations/:session_id/cancel";
/** The headers of ours that execute takes beside the contract's, allowed only when a browser asks for them. */
const EXECUTE_EXTENSIONS = ["Idempotency-Key", "X-Service-Signature"];

/**
 * The API channel: execute, its CORS preflight, the conversation history, and beside it the
 * live-chat subscription and cancel. Built in, its
 * routes answer the internal `Reply` (no Web `Response` on the Node fast path), which a
 * plugin's public `Route` does not offer.
 */
export function apiChannel(): { name: string; routes: Route<ServiceContext>[] } {
  return {
    name: "api-channel",
    routes: [
      { method: "OPTIONS", path: EXECUTE_PATH, handle: (request) => executePreflight(request) },
      { method: "POST", path: EXECUTE_PATH, handle: (request, _params, ctx) => execute(request, ctx) },
      // Browsers reading history with a publishable key send a preflight too.
      { method: "OPTIONS", path: HISTORY_PATH, handle: () => preflight("GET, OPTIONS") },
      { method: "GET", path: HISTORY_PATH, handle: (request, params, ctx) => history(request, params.session_id as string, ctx) },
      // Live chat, beside history: the user's subscription and the user's cancel.
      { method: "OPTIONS", path: EVENTS_PATH, handle: () => preflight("GET, OPTIONS", "Authorization, Content-Type, Last-Event-ID") },
      { method: "GET", path: EVENTS_PATH, handle: (request, params, ctx) => conversationEvents(request, params.session_id as string, ctx) },
      // The cancels take a signature on a channel that requires one: a browser may send it.
      { method: "OPTIONS", path: CANCEL_PATH, handle: () => preflight("POST, OPTIONS", SIGNED_HEADERS) },
      { method: "POST", path: CANCEL_PATH, handle: (request, params, ctx) => cancelLiveChat(request, params.session_id as string, ctx) },
      // Resumable streams: the run in flight's stream, and stopping it (docs/streaming.md).
      { method: "OPTIONS", path: STREAM_PATH, handle: () => preflight("GET, OPTIONS") },
      { method: "GET", path: STREAM_PATH, handle: (request, params, ctx) => resumeConversationStream(request, params.session_id as string, ctx) },
      { method: "OPTIONS", path: RUN_CANCEL_PATH, handle: () => preflight("POST, OPTIONS", SIGNED_HEADERS) },
      { method: "POST", path: RUN_CANCEL_PATH, handle: (request, params, ctx) => cancelConversationRun(request, params.session_id as string, ctx) },
    ],
  };
}

/**
 * The execute preflight: the contract's `Authorization, Content-Type`, and beside them
 * `Idempotency-Key` and `X-Service-Signature` only when the browser asks to send them
 * (@channelkit/client sends a key; our extension, docs/api.md), so that the contract's
 * answer stays exactly what it says.
 */
function executePreflight(request: IncomingRequest): Reply {
  const asked = (request.headers.get("access-control-request-headers") ?? "").split(",").map((name) => name.trim().toLowerCase());
  const allowed = ["Authorization, Content-Type", ...EXECUTE_EXTENSIONS.filter((name) => asked.includes(name.toLowerCase()))];
  const reply = preflight("POST, OPTIONS", allowed.join(", "));
  reply.headers.vary = "Access-Control-Request-Headers";
  return reply;
}
