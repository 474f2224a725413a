import { type ChannelRecord, type ConversationRecord, type LiveChatService, liveChatView } from "../../plugin/api.js";

/** A conversation as the inbox's agents see it: its live chat now, and since when. */
export function inboxConversationView(livechat: LiveChatService, channel: ChannelRecord | null, conversation: ConversationRecord) {
  const state = livechat.state(channel, conversation);
  const waiting = state.mode === "livechat_waiting";
  return {
    conversation_id: conversation.id,
    channel_id: conversation.channelId,
    ...liveChatView(state),
    /** When the conversation entered its mode (ISO 8601). */
    mode_since: conversation.modeSince,
    /** When a waiting conversation expires if no agent accepts it; null otherwise. */
    expires_at: waiting ? new Date(Date.parse(conversation.modeSince) + livechat.waitTimeoutMs(channel)).toISOString() : null,
    created_at: conversation.createdAt,
    updated_at: conversation.updatedAt,
  };
}

/** The JSON shape of {@link inboxConversationView}. */
export type InboxConversationView = ReturnType<typeof inboxConversationView>;
