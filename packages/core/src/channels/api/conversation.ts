import { ServiceError } from "../../http/errors.js";
import type { ChannelRecord, ConversationRecord, Storage } from "../../storage/types.js";

/**
 * The conversation a request names, if it may be used on this channel: unknown or of another
 * tenant is `conversation_not_found` (its existence is not revealed across tenants), same
 * tenant but another channel is `conversation_forbidden`.
 */
export async function findOwnConversation(storage: Storage, channel: ChannelRecord, conversationId: string): Promise<ConversationRecord> {
  const conversation = await storage.findConversation(conversationId);
  if (!conversation || conversation.tenantId !== channel.tenantId) throw new ServiceError("conversation_not_found");
  if (conversation.channelId !== channel.id) throw new ServiceError("conversation_forbidden");
  return conversation;
}
