import type { ServiceContext } from "../../context.js";
import { preflight } from "../../http/cors.js";
import type { Route } from "../../http/router.js";
import { newMessage } from "./new-message.js";
import { startConversation } from "./start-conversation.js";

const START_PATH = "/channels/webhook/:client_id/startConversation";
const MESSAGE_PATH = "/channels/webhook/:client_id/newMessage";
/** A signed call from a browser sends the signature header too. */
const WEBHOOK_HEADERS = "Content-Type, X-Service-Signature";
/** `newMessage` takes an `Idempotency-Key` too. */
const MESSAGE_HEADERS = `${WEBHOOK_HEADERS}, Idempotency-Key`;

/**
 * The webhook channel: any HTTP client talks to a channel's flow through two routes scoped
 * by the channel's unguessable `client_id`, with no key (a signature when the channel
 * requires one). Built in, like the API channel.
 */
export function webhookChannel(): { name: string; routes: Route<ServiceContext>[] } {
  return {
    name: "webhook-channel",
    routes: [
      { method: "OPTIONS", path: START_PATH, handle: () => preflight("POST, OPTIONS", WEBHOOK_HEADERS) },
      { method: "POST", path: START_PATH, handle: (request, params, ctx) => startConversation(request, params.client_id as string, ctx) },
      { method: "OPTIONS", path: MESSAGE_PATH, handle: () => preflight("POST, OPTIONS", MESSAGE_HEADERS) },
      { method: "POST", path: MESSAGE_PATH, handle: (request, params, ctx) => newMessage(request, params.client_id as string, ctx) },
    ],
  };
}
