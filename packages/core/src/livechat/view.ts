import type { LiveChatState } from "./live-chat.js";

/** A conversation's live chat in the wire's names, as history and the live-chat routes show it. */
export function liveChatView(state: LiveChatState) {
  return {
    mode: state.mode,
    livechat_status_message: state.statusMessage,
    livechat_conversation_id: state.livechatConversationId,
  };
}
