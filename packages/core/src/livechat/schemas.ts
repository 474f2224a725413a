import { z } from "zod";
import { userText } from "../channels/user-text.js";

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
