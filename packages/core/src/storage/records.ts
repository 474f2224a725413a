import type { ConversationRecord, MessageRecord, NewMessage, RunConversation } from "./types.js";

/**
 * The record of `message` as stored at `turnIndex`: what a storage returns for a message it
 * appended. Field by field rather than a spread (see docs/benchmarks.md, "Why the code
 * looks like this").
 */
export function storedMessage(conversationId: string, turnIndex: number, message: NewMessage): MessageRecord {
  return {
    conversationId,
    turnIndex,
    origin: message.origin,
    role: message.role,
    content: message.content,
    timestamp: message.timestamp,
    tokenCount: message.tokenCount,
    runId: message.runId,
    stepId: message.stepId,
    nodeType: message.nodeType,
    toolCalls: message.toolCalls,
    toolCallId: message.toolCallId,
    livechatMessageId: message.livechatMessageId,
    sender: message.sender,
  };
}

/** The record of the conversation a run starts at `at`: in `bot` mode, no flow state, its user message at turn 0. */
export function newConversationRecord(conversation: RunConversation, at: string): ConversationRecord {
  return {
    id: conversation.id,
    tenantId: conversation.tenantId,
    channelId: conversation.channelId,
    mode: "bot",
    flowState: undefined,
    nextTurn: 1,
    modeSince: at,
    livechatConversationId: null,
    language: conversation.language ?? null,
    createdAt: at,
    updatedAt: at,
  };
}

/**
 * Why a run is stored `cancelled` when the instance running it stopped before it ended: by the
 * next run taking its turn over (a lapsed lease), or once its recorded stream lapsed.
 */
export const ABANDONED_RUN_ERROR = "The run was abandoned: the instance running it stopped before it ended.";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A record's id (a conversation's, a channel's) as it is stored: UUIDs compare
 * case-insensitively (RFC 9562), so an upper-case form names the same record; the service
 * writes them in lower case.
 */
export function canonicalId(id: string): string {
  return UUID.test(id) ? id.toLowerCase() : id;
}
