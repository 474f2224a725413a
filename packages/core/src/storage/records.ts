import type { ChannelPatch, ChannelRecord, ConversationMode, ConversationRecord, MessageRecord, NewMessage, RunConversation } from "./types.js";

/** The modes in which a live chat holds a conversation open: never ended, whatever its age (`Storage.findEndedConversations`). */
export const LIVE_MODES: readonly ConversationMode[] = ["livechat_waiting", "livechat_active"];

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
    metadata: message.metadata,
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

/** The fields of a channel a store keeps as JSON text. */
type ChannelJsonField = "allowedOrigins" | "languages" | "livechatMessages" | "widget" | "settings" | "rateLimits";

/** A channel's fields as a store keeps them: its JSON fields as JSON text, `rateLimits` null when it has none. */
export type StoredChannel = Omit<ChannelRecord, ChannelJsonField> & { [Field in Exclude<ChannelJsonField, "rateLimits">]: string } & {
  rateLimits: string | null;
};

/**
 * The fields a channel patch sets, as a store keeps them (see {@link StoredChannel}): only those
 * the patch gives, for a field left `undefined` keeps the stored value. What `updateChannel`
 * writes, in the memory store as in the SQL ones.
 */
export function storedChannelPatch(patch: ChannelPatch): Partial<Pick<StoredChannel, keyof ChannelPatch>> {
  const fields: Partial<Pick<StoredChannel, keyof ChannelPatch>> = {};
  if (patch.name !== undefined) fields.name = patch.name;
  if (patch.environment !== undefined) fields.environment = patch.environment;
  if (patch.state !== undefined) fields.state = patch.state;
  if (patch.flowName !== undefined) fields.flowName = patch.flowName;
  if (patch.allowedOrigins !== undefined) fields.allowedOrigins = JSON.stringify(patch.allowedOrigins);
  if (patch.defaultStream !== undefined) fields.defaultStream = Boolean(patch.defaultStream);
  if (patch.requireSignature !== undefined) fields.requireSignature = Boolean(patch.requireSignature);
  if (patch.signingSecretEncrypted !== undefined) fields.signingSecretEncrypted = patch.signingSecretEncrypted;
  if (patch.languages !== undefined) fields.languages = JSON.stringify(patch.languages);
  if (patch.livechatMessages !== undefined) fields.livechatMessages = JSON.stringify(patch.livechatMessages);
  if (patch.livechatWaitTimeoutSeconds !== undefined) fields.livechatWaitTimeoutSeconds = patch.livechatWaitTimeoutSeconds;
  if (patch.runTimeoutSeconds !== undefined) fields.runTimeoutSeconds = patch.runTimeoutSeconds;
  if (patch.rateLimits !== undefined) fields.rateLimits = patch.rateLimits ? JSON.stringify(patch.rateLimits) : null;
  if (patch.resumableStreams !== undefined) fields.resumableStreams = Boolean(patch.resumableStreams);
  if (patch.widget !== undefined) fields.widget = JSON.stringify(patch.widget);
  if (patch.settings !== undefined) fields.settings = JSON.stringify(patch.settings);
  if (patch.sealedSettings !== undefined) fields.sealedSettings = patch.sealedSettings;
  if (patch.retentionDays !== undefined) fields.retentionDays = patch.retentionDays;
  return fields;
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

/**
 * The message metadata fields that name an end user: a chat platform's user id
 * (`platform_user_id`, as `@channelkit/chat` stores it on each user message) and
 * `external_user_id` (for a host that stores its own user id in a message's metadata).
 */
export const END_USER_METADATA_FIELDS = ["platform_user_id", "external_user_id"] as const;

/** Whether a message's metadata (its stored JSON text, or null) names `externalUserId` in one of the {@link END_USER_METADATA_FIELDS}. */
export function metadataNamesEndUser(metadata: string | null, externalUserId: string): boolean {
  if (metadata === null || !metadata.includes(JSON.stringify(externalUserId))) return false;
  let parsed: unknown;
  try {
    parsed = JSON.parse(metadata);
  } catch {
    return false;
  }
  if (parsed === null || typeof parsed !== "object") return false;
  const fields = parsed as Record<string, unknown>;
  return END_USER_METADATA_FIELDS.some((field) => fields[field] === externalUserId);
}
