/**
 * What core needs from a database, and nothing more. `@channelkit/kysely` implements it on
 * SQLite and Postgres; every method is one round trip or one transaction, so a change made
 * by any process is seen by every other on its very next request (no cache).
 */

/** Deployment environment of a channel; keys carry the one they were created for. */
export type Environment = "prod" | "dev" | "staging";
/** Lifecycle state of a channel. */
export type ChannelState = "active" | "inactive" | "archived";
/** Channel types; only `api` channels serve the API routes. */
export type ChannelType = "api" | "webhook";
/** Server-to-server (`svc_live_`/`svc_test_` keys) or client-to-server (`svc_pub_` keys). */
export type ChannelMode = "server" | "public";
/** Outcome of a run. */
export type RunStatus = "success" | "error" | "pending" | "cancelled";
/** Who is answering a conversation: the bot, or a live-chat stage. */
export type ConversationMode =
  | "bot"
  | "livechat_waiting"
  | "livechat_active"
  | "livechat_closed"
  | "livechat_expired"
  | "livechat_cancelled"
  | "livechat_unavailable";
/** Role of a stored message. */
export type MessageRole = "user" | "assistant" | "system" | "tool";

/** A tenant: the owner of channels and conversations. */
export interface TenantRecord {
  id: string;
  name: string;
  createdAt: string;
}

/** A channel as stored. The signing secret is kept encrypted, never in clear. */
export interface ChannelRecord {
  id: string;
  tenantId: string;
  name: string | null;
  type: ChannelType;
  mode: ChannelMode;
  environment: Environment;
  state: ChannelState;
  flowName: string;
  allowedOrigins: string[];
  defaultStream: boolean;
  requireSignature: boolean;
  /** AES-256-GCM ciphertext of the signing secret, or null when none is stored. */
  signingSecretEncrypted: string | null;
  /** Masked form of the active key (`svc_live_****a1b2`); kept by the storage with the key. */
  apiKeyHint: string | null;
  /** Public identifier of a webhook channel, null for other types. */
  clientId: string | null;
  languages: string[];
  /** Tenant-configured live-chat status messages, by conversation mode. */
  livechatMessages: Partial<Record<ConversationMode, string>>;
  createdAt: string;
  updatedAt: string;
}

/** An API key as stored: only its SHA-256 hash, never the key. */
export interface ApiKeyRecord {
  id: string;
  channelId: string;
  tenantId: string;
  /** Lowercase hex SHA-256 of the whole key string. */
  hash: string;
  /** `svc_live_`, `svc_test_` or `svc_pub_`. */
  prefix: string;
  environment: Environment;
  hint: string;
  createdAt: string;
  expiresAt: string | null;
  revokedAt: string | null;
}

/** A conversation as stored, with the flow's own state. */
export interface ConversationRecord {
  id: string;
  tenantId: string;
  channelId: string;
  mode: ConversationMode;
  /** The flow's persisted per-conversation state (JSON). */
  flowState: unknown;
  /** The next free `turn_index`. */
  nextTurn: number;
  livechatConversationId: string | null;
  createdAt: string;
  updatedAt: string;
}

/** A tool call, in the service's format. */
export interface ToolCall {
  id: string;
  name: string;
  arguments: unknown;
}

/** A message as stored, in the order of `turnIndex`. */
export interface MessageRecord {
  conversationId: string;
  turnIndex: number;
  origin: "agent" | "livechat";
  role: MessageRole;
  content: string;
  timestamp: string;
  tokenCount: number;
  runId: string | null;
  stepId: string | null;
  nodeType: string | null;
  toolCalls: ToolCall[] | null;
  toolCallId: string | null;
  livechatMessageId: string | null;
  sender: string | null;
}

/** A message to append; the storage assigns its `turnIndex`. */
export type NewMessage = Omit<MessageRecord, "conversationId" | "turnIndex">;

/** A finished run as stored. */
export interface RunRecord {
  id: string;
  conversationId: string;
  channelId: string;
  tenantId: string;
  status: RunStatus;
  flowName: string;
  flowVersion: string | null;
  result: unknown;
  error: string | null;
  executionOrder: string[];
  startedAt: string;
  completedAt: string;
  durationMs: number;
}

/** Everything a finished run writes, applied in one transaction. */
export interface CompleteRunInput {
  run: RunRecord;
  /** Creates the conversation when it does not exist yet (a run that started it). */
  conversation: {
    id: string;
    tenantId: string;
    channelId: string;
    /**
     * True when this run started the conversation under a new id: the storage inserts it
     * (failing if the id exists) instead of creating-or-updating it, one lookup fewer.
     */
    isNew?: boolean;
  };
  /** Messages in order; they get the next contiguous turn indexes. */
  messages: NewMessage[];
  /** New flow state when the key is present (even as `undefined`, which clears it); omit the key to keep the stored one. */
  flowState?: unknown;
  /** New conversation mode, or `undefined` to keep the stored one. */
  mode?: ConversationMode;
}

/** A key with the channel it opens, as found by one lookup on the request path. */
export interface KeyWithChannel {
  key: ApiKeyRecord;
  channel: ChannelRecord;
}

/** Fields of a channel that can change after creation. */
export type ChannelPatch = Partial<
  Pick<
    ChannelRecord,
    | "name"
    | "environment"
    | "state"
    | "flowName"
    | "allowedOrigins"
    | "defaultStream"
    | "requireSignature"
    | "signingSecretEncrypted"
    | "languages"
    | "livechatMessages"
  >
>;

/** The operations core needs from a database. */
export interface Storage {
  /** Finds a key by the hash of its string, with its channel, in one query. */
  findKeyByHash(hash: string): Promise<KeyWithChannel | null>;
  findConversation(id: string): Promise<ConversationRecord | null>;
  /** The most recent `limit` messages of a conversation, oldest first. */
  listRecentMessages(conversationId: string, limit: number): Promise<MessageRecord[]>;
  /**
   * Stores a finished run, creates its conversation if needed and appends its messages with
   * contiguous turn indexes, all in one transaction: concurrent calls on one conversation,
   * from any number of processes, never leave a gap or a duplicate. Returns the messages
   * as stored.
   */
  completeRun(input: CompleteRunInput): Promise<MessageRecord[]>;
  findRun(id: string): Promise<RunRecord | null>;

  createTenant(tenant: TenantRecord): Promise<void>;
  findTenant(id: string): Promise<TenantRecord | null>;
  countTenants(): Promise<number>;
  /** Creates a channel and its first key in one transaction. */
  createChannel(channel: ChannelRecord, key: ApiKeyRecord): Promise<void>;
  findChannel(id: string): Promise<ChannelRecord | null>;
  updateChannel(id: string, patch: ChannelPatch, updatedAt: string): Promise<ChannelRecord | null>;
  /** Revokes every active key of the channel and stores the new one, in one transaction. */
  replaceChannelKey(channelId: string, key: ApiKeyRecord, revokedAt: string): Promise<void>;

  /** Brings the schema up to date. */
  migrate(): Promise<void>;
  close(): Promise<void>;
}
