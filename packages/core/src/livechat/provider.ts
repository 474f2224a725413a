import type { MessageView } from "../conversations/message-view.js";
import type { ChannelPlugin } from "../plugins.js";

/** The conversation a provider is told about. */
export interface LiveChatConversation {
  tenantId: string;
  channelId: string;
  conversationId: string;
  /**
   * The live chat's id, set when an agent accepts (the provider's own when it gives one to
   * `accept`, else a UUID): null before, or the previous live chat's while a new one waits.
   */
  livechatConversationId: string | null;
}

/** A handover, as a provider is told of it: the conversation and its transcript so far. */
export interface LiveChatHandover extends LiveChatConversation {
  /** The conversation's most recent messages (up to 50), oldest first, the flow's handover message included. */
  transcript: MessageView[];
}

/** A user's message while a human has the conversation, as stored (`origin: "livechat"`, `sender: "user"`). */
export interface LiveChatUserMessage extends LiveChatConversation {
  message: MessageView;
}

/**
 * The human side of live chat: where a handed-over conversation goes. channelkit tells it of
 * handovers, of the user's messages and of cancels; it reports back through
 * `ctx.livechat` (an agent joined, wrote, closed; nobody is available), from its routes
 * (it is a plugin: `routes` and `init` as any other) or from its own connections.
 *
 * Every call is made after the event is stored, off the request's path; a hook that throws
 * or rejects is logged and changes nothing stored. Two providers ship: `liveChatInbox()` (agents
 * answer through HTTP routes) and `liveChatWebhookBridge()` (to a help desk).
 */
export interface LiveChatProvider extends ChannelPlugin {
  /**
   * Whether a handover now can reach someone (default: yes). False makes the handover
   * `livechat_unavailable` and the bot keeps the conversation. Asked before the handover
   * is stored; a throw counts as false.
   */
  available?(conversation: Omit<LiveChatConversation, "livechatConversationId">): boolean | Promise<boolean>;
  /** A conversation was handed over and waits for an agent. */
  handover?(event: LiveChatHandover): void | Promise<void>;
  /** The user wrote while the conversation waits for or has an agent. */
  userMessage?(event: LiveChatUserMessage): void | Promise<void>;
  /** The user left the queue or ended the live chat. */
  cancelled?(event: LiveChatConversation): void | Promise<void>;
}
