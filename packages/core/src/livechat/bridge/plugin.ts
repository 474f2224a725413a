import { Deliveries, type RetryPolicy } from "./deliveries.js";
import { bridgeEventRoute } from "./inbound.js";
import { bridgeEventSchema, bridgeOptionsSchema } from "./schemas.js";
import { defineRoute, type LiveChatConversation, type LiveChatProvider, type Logger, routeDocs } from "../../plugin/api.js";

/** Options of {@link liveChatWebhookBridge}. */
export interface LiveChatWebhookBridgeOptions {
  /** Where the events go: your receiver, which forwards them to Zendesk, Intercom, Chatwoot... */
  url: string;
  /**
   * The HMAC secret shared with the receiver (16 characters or more; `openssl rand -hex 32`):
   * it signs what the bridge sends and verifies what the receiver sends back, in
   * `X-Channelkit-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`.
   */
  secret: string;
  /** Retries of a delivery that failed (network, timeout, 408, 429, 5xx). Default: 8 attempts, from 500 ms, at most 30 s apart. */
  retry?: Partial<RetryPolicy>;
  /** How long one attempt waits for the receiver's answer, in ms (default 10000). */
  timeoutMs?: number;
  /** The `fetch` deliveries use (default: the global one). */
  fetch?: typeof fetch;
  /** Whether a handover now can reach someone (default: yes); false makes it `livechat_unavailable`. */
  available?: LiveChatProvider["available"];
}

/** Path of the inbound route, under the service's `basePath`. */
export const BRIDGE_EVENTS_PATH = "/api/v1/livechat/bridge/events";

/**
 * A live-chat provider that bridges to a help desk over HTTP: it POSTs each handover (with
 * the transcript), each user message and each cancel to `url` as signed JSON, retrying with
 * backoff while the receiver is down, and takes the human side's events (an agent joined,
 * wrote, closed; nobody is available) at `POST /api/v1/livechat/bridge/events`, signed with
 * the same secret. Deliveries are queued in memory: those pending when the process ends are
 * lost. See docs/livechat.md, "The webhook bridge".
 *
 * @example
 * const service = await createChannelService({
 *   storage,
 *   flows,
 *   livechat: liveChatWebhookBridge({ url: "https://desk-bridge.example.com/channelkit", secret: process.env.BRIDGE_SECRET }),
 * });
 */
export function liveChatWebhookBridge(options: LiveChatWebhookBridgeOptions): LiveChatProvider {
  const parsed = bridgeOptionsSchema.safeParse(options);
  if (!parsed.success) throw new Error(`channelkit: invalid liveChatWebhookBridge options: ${parsed.error.issues.map((issue) => issue.message).join("; ")}`);
  let logger: Logger = console;
  const deliveries = new Deliveries({
    url: options.url,
    secret: options.secret,
    retry: { attempts: 8, initialDelayMs: 500, maxDelayMs: 30_000, ...options.retry },
    timeoutMs: options.timeoutMs ?? 10_000,
    fetch: options.fetch ?? ((input, init) => fetch(input, init)),
    logger: () => logger,
  });
  const send = (conversation: LiveChatConversation, type: string, extra: Record<string, unknown> = {}) =>
    deliveries.enqueue(conversation.conversationId, {
      id: crypto.randomUUID(),
      type,
      created_at: new Date().toISOString(),
      tenant_id: conversation.tenantId,
      channel_id: conversation.channelId,
      conversation_id: conversation.conversationId,
      livechat_conversation_id: conversation.livechatConversationId,
      ...extra,
    });
  return {
    id: "livechat-bridge",
    init(ctx) {
      logger = ctx.logger;
    },
    ...(options.available ? { available: options.available } : {}),
    handover: (event) => send(event, "handover", { transcript: event.transcript }),
    userMessage: (event) => send(event, "user_message", { message: event.message }),
    cancelled: (event) => send(event, "cancelled"),
    routes: [
      // The help desk's receiver is a server: no browser calls it, so no preflight.
      defineRoute({
        method: "POST",
        path: BRIDGE_EVENTS_PATH,
        auth: "bridge",
        body: bridgeEventSchema,
        // A wrong signature counts as a failed authentication: its answer carries the RateLimit fields.
        doc: {
          operationId: "postBridgeEvent",
          summary: "Report the human side's event",
          description:
            "What the help desk's receiver sends back: an agent joined, wrote, closed, or nobody is available. The signature is checked on the raw body first.",
          tag: "bridge",
          body: { component: "BridgeEvent", required: true },
          responses: { 200: { description: "The conversation's live chat as it is now, or `{ message }` for a message.", json: "BridgeEventResponse" } },
          errors: [
            "signature_required",
            "invalid_signature",
            "signature_expired",
            ...routeDocs.JSON_BODY,
            "conversation_not_found",
            "livechat_conflict",
            "rate_limited",
            "runtime_error",
          ],
        },
        handle: ({ request }, ctx) => bridgeEventRoute(request, ctx, options.secret),
      }),
    ],
  };
}
