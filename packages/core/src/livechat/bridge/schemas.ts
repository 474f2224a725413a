import { z } from "zod";
import { agentMessageResponseSchema, livechatConversationIdSchema, liveChatSender, liveChatStateResponseSchema, userText } from "../../plugin/api.js";

const conversationId = z.string("conversation_id is required").min(1, "conversation_id is required");

/** What the human side sends to `POST /api/v1/livechat/bridge/events`, by `type`. Unknown fields are refused. */
export const bridgeEventSchema = z.discriminatedUnion(
  "type",
  [
    z.strictObject({ type: z.literal("agent_joined"), conversation_id: conversationId, livechat_conversation_id: livechatConversationIdSchema.optional() }),
    z.strictObject({
      type: z.literal("agent_message"),
      conversation_id: conversationId,
      message: z.strictObject({
        content: userText("message.content"),
        sender: liveChatSender.default("agent"),
        id: z.string().min(1).max(200, "message.id is at most 200 characters").optional(),
      }),
    }),
    z.strictObject({ type: z.literal("closed"), conversation_id: conversationId }),
    z.strictObject({ type: z.literal("unavailable"), conversation_id: conversationId }),
  ],
  { error: "type must be agent_joined, agent_message, closed or unavailable" },
);

/** Options of `liveChatWebhookBridge()`, validated when it is created. */
export const bridgeOptionsSchema = z.strictObject({
  url: z.url({ protocol: /^https?$/, error: "url must be an http(s) URL" }),
  secret: z.string("secret is required").min(16, "secret must be at least 16 characters"),
  retry: z
    .strictObject({
      attempts: z.number().int().min(1).max(100).optional(),
      initialDelayMs: z.number().int().min(0).optional(),
      maxDelayMs: z.number().int().min(0).optional(),
    })
    .optional(),
  timeoutMs: z.number().int().min(1).optional(),
  fetch: z.custom<typeof fetch>((value) => typeof value === "function", "fetch must be a function").optional(),
  available: z.custom<(conversation: unknown) => unknown>((value) => typeof value === "function", "available must be a function").optional(),
});

/** What `POST /api/v1/livechat/bridge/events` answers: the conversation's live chat as it is now, or `{ message }` for a message. */
export const bridgeEventResponseSchema = z.union([liveChatStateResponseSchema, agentMessageResponseSchema]);
