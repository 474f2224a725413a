import { ServiceError } from "../http/errors.js";
import type { Reply } from "../http/reply.js";
import { json } from "../http/respond.js";
import { canonicalId } from "../storage/records.js";
import type { ChannelRecord, ConversationRecord, Storage } from "../storage/types.js";

/**
 * The conversation a request names, if it may be used on this channel: unknown or of another
 * tenant is `conversation_not_found` (its existence is not revealed across tenants), same
 * tenant but another channel is `conversation_forbidden`, or `conversation_not_found` too
 * with `{ otherChannel: "not_found" }` (a channel whose clients must not learn of others').
 */
export async function findOwnConversation(
  storage: Storage,
  channel: ChannelRecord,
  conversationId: string,
  options: { otherChannel?: "forbidden" | "not_found" } = {},
): Promise<ConversationRecord> {
  const conversation = await storage.findConversation(canonicalId(conversationId));
  if (!conversation || conversation.tenantId !== channel.tenantId) throw new ServiceError("conversation_not_found");
  if (conversation.channelId !== channel.id) throw new ServiceError(options.otherChannel === "not_found" ? "conversation_not_found" : "conversation_forbidden");
  return conversation;
}

/**
 * {@link findOwnConversation} for the routes beside history, which answer an unknown,
 * foreign-channel or foreign-tenant conversation with the contract's
 * `404 { "detail": "No conversation found for session id <id>" }`.
 */
export async function conversationOrDetail(storage: Storage, channel: ChannelRecord, conversationId: string): Promise<ConversationRecord | Reply> {
  try {
    return await findOwnConversation(storage, channel, conversationId);
  } catch (error) {
    if (error instanceof ServiceError && error.status < 500) return json({ detail: `No conversation found for session id ${conversationId}` }, 404);
    throw error;
  }
}

/** Whether {@link conversationOrDetail} answered the 404. */
export function isDetailReply(found: ConversationRecord | Reply): found is Reply {
  return "status" in found;
}
