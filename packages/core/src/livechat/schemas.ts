import { z } from "zod";
import { userText } from "../channels/user-text.js";
import { messageViewSchema } from "../conversations/message-view.js";

/** Who writes on the human side; `system` messages are stored with the `system` role, the others as `assistant`. */
export const liveChatSender = z.enum(["agent", "supervisor", "bot", "system"], "sender must be agent, supervisor, bot or system");

/** A message from the human side, in the wire's names (the inbox's and the bridge's routes). */
export const agentMessageSchema = z.object({
  content: userText("content"),
  sender: liveChatSender.default("agent"),
  livechat_message_id: z.string().min(1).max(200, "livechat_message_id is at most 200 characters").optional(),
});

/** Raw input of {@link agentMessageSchema}. */
export type AgentMessageInput = z.input<typeof agentMessageSchema>;

/** The id a provider gives its live chat when an agent accepts (optional). */
export const livechatConversationIdSchema = z.string().min(1).max(200, "livechat_conversation_id is at most 200 characters");

/** Who answers a conversation: the bot, or a live-chat stage (docs/livechat.md). */
export const conversationModeSchema = z.enum([
  "bot",
  "livechat_waiting",
  "livechat_active",
  "livechat_closed",
  "livechat_expired",
  "livechat_cancelled",
  "livechat_unavailable",
]);

/** A conversation's live chat in the wire's names (`liveChatView`), as history and the live-chat routes show it. */
export const liveChatViewSchema = z.object({
  mode: conversationModeSchema.meta({ description: "The mode now: `bot` for a conversation that never handed over." }),
  livechat_status_message: z.string().nullable().meta({ description: "The channel's configured text for this mode, or null." }),
  livechat_conversation_id: z.string().nullable().meta({ description: "The provider's id of the current or last live chat, or null." }),
});

/** What the user's live-chat cancel and the bridge's mode events answer: the conversation's live chat as it is now. */
export const liveChatStateResponseSchema = liveChatViewSchema.extend({ conversation_id: z.uuid() });

/** What sending a message from the human side answers: the message as stored. */
export const agentMessageResponseSchema = z.object({ message: messageViewSchema });

/**
 * An event of `GET /public/v1/api/conversations/{id}/events`: the mode (first, then on
 * each change) or a live-chat message (its turn index is the SSE event's `id`).
 */
export const conversationEventSchema = z.discriminatedUnion("type", [
  liveChatViewSchema.extend({ type: z.literal("mode") }),
  z.object({ type: z.literal("message"), message: messageViewSchema }),
]);
