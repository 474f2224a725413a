import { newMessage } from "./new-message.js";
import { newMessageSchema, startConversationSchema } from "./schemas.js";
import { startConversation } from "./start-conversation.js";
import { type ChannelPlugin, defineRoute, type ParameterSpec, routeDocs } from "../../plugin/api.js";

const CHANNEL = "/channels/webhook/:client_id" as const;
/** A signed call from a browser sends the signature header too. */
const WEBHOOK_HEADERS = ["Content-Type", "X-Service-Signature"];
const CLIENT_ID: ParameterSpec = {
  name: "client_id",
  in: "path",
  required: true,
  description: "The webhook channel's `client_id` (the channel view shows it).",
};
/** What both routes may answer before their own: the channel, its state, the body, the signature. */
const CHECKS = ["channel_not_found", "channel_archived", "channel_inactive", "rate_limited", "runtime_error", ...routeDocs.JSON_BODY, ...routeDocs.SIGNATURE];

/**
 * The webhook channel: any HTTP client talks to a channel's flow through two routes scoped
 * by the channel's unguessable `client_id`, with no key (a signature when the channel
 * requires one). Built in, like the API channel.
 */
export function webhookChannel(): ChannelPlugin {
  return {
    id: "webhook",
    routes: [
      defineRoute({
        method: "POST",
        path: `${CHANNEL}/startConversation` as const,
        auth: "none",
        cors: { headers: WEBHOOK_HEADERS },
        body: startConversationSchema,
        doc: {
          operationId: "startWebhookConversation",
          summary: "Start a conversation",
          description:
            "Opens a conversation in one of the channel's languages and runs the flow's greeting. Checks: the channel, the media type and size, the signature when required, the body.",
          tag: "webhook",
          parameters: [CLIENT_ID, routeDocs.SIGNATURE_HEADER],
          body: { component: "StartConversationRequest", required: true },
          responses: { 200: { description: "The conversation record and the events of the greeting.", json: "StartConversationResponse" } },
          errors: [...CHECKS, "flow_unavailable"],
        },
        handle: ({ request, params }, ctx) => startConversation(request, params.client_id, ctx),
      }),
      defineRoute({
        method: "POST",
        path: `${CHANNEL}/newMessage` as const,
        auth: "none",
        // `newMessage` takes an `Idempotency-Key` too.
        cors: { headers: [...WEBHOOK_HEADERS, "Idempotency-Key"] },
        body: newMessageSchema,
        doc: {
          operationId: "sendWebhookMessage",
          summary: "Send a message",
          description: "Runs the flow on the user's input in a conversation of this channel; runs of one conversation take turns.",
          tag: "webhook",
          parameters: [CLIENT_ID, routeDocs.SIGNATURE_HEADER, routeDocs.IDEMPOTENCY_KEY_HEADER],
          body: { component: "NewMessageRequest", required: true },
          responses: {
            200: {
              description: "The events the message produced (with an `Idempotency-Key` already answered, that answer again).",
              json: "NewMessageResponse",
              optionalHeaders: ["Idempotent-Replayed"],
            },
          },
          errors: [...CHECKS, "conversation_not_found", ...routeDocs.IDEMPOTENCY, "conversation_busy", "flow_unavailable"],
        },
        handle: ({ request, params }, ctx) => newMessage(request, params.client_id, ctx),
      }),
    ],
  };
}
