/**
 * What core needs from a database, and nothing more. `@channelkit/kysely` implements it on
 * SQLite and Postgres; every method is one round trip or one transaction, so a change made
 * by any process is seen by every other on its very next request (no cache).
 */
import type { ChannelRateLimits } from "../ratelimit/rules.js";
import type { RateLimitStore } from "../ratelimit/store.js";
import type { PluginSchema, PluginStore } from "../plugin/storage.js";

/** Deployment environment of a channel; keys carry the one they were created for. */
export type Environment = "prod" | "dev" | "staging";
/** Lifecycle state of a channel. */
type ChannelState = "active" | "inactive" | "archived";
/**
 * A channel's type: `api` and `webhook` are channelkit's own, any other is the name of a
 * channel type a plugin registers (`ChannelPlugin.channelTypes`, e.g. `telegram`). Only
 * `api` channels serve the API routes.
 */
// `string & {}` keeps the built-in types suggested beside any plugin's.
export type ChannelType = "api" | "webhook" | (string & {});
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
  /** How long a handed-over conversation waits for an agent before it expires, in seconds; null for the default (600). */
  livechatWaitTimeoutSeconds: number | null;
  /** How long a run may last before it is stopped and stored as an `error`, in seconds; null for the default (300). */
  runTimeoutSeconds: number | null;
  /** The channel's own rate limits, each replacing the service's; null (or a name left out) for the service's. */
  rateLimits: ChannelRateLimits | null;
  /** Whether a streamed run goes on when its client goes away, and can be resumed from any instance. */
  resumableStreams: boolean;
  /** What the channel's chat widget overrides of the defaults (strings per language, theme, features), as validated by the admin. */
  widget: Record<string, unknown>;
  /**
   * A plugin type's settings that are not secrets, as validated by the type's schema; `{}`
   * for the built-in types.
   */
  settings: Record<string, unknown>;
  /**
   * The type's secret settings (those its `secrets` names) as one JSON object, sealed with
   * the master key like the signing secret (`SecretBox.encrypt`); null when none is set.
   */
  sealedSettings: string | null;
  /**
   * Days after which a conversation of the channel that ended (no message, no run, no live
   * chat for that long) is deleted by the retention sweep; null (or absent) keeps them for ever.
   */
  retentionDays?: number | null;
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
  /** ISO 8601 time the conversation entered its `mode`: a wait expires from it, and it names the mode in a compare-and-set. */
  modeSince: string;
  /** The live-chat provider's id of the current or last live chat. */
  livechatConversationId: string | null;
  /** The language the conversation was started in (`xx_XX`, webhook channels), or null. */
  language: string | null;
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
  /**
   * Free data kept with the message, or null: a channel's own ids of it (a chat platform's
   * user, message and thread ids on the user's message). Shown in history as `metadata`.
   */
  metadata: Record<string, unknown> | null;
}

/** A message to append; the storage assigns its `turnIndex`. */
export type NewMessage = Omit<MessageRecord, "conversationId" | "turnIndex">;

/**
 * A run as stored. Its row is written when the run takes its turn (status `running`, with
 * `completedAt` equal to `startedAt` and `durationMs` 0 until it ends) and completed when it
 * ends; a run cancelled before its turn is written once, complete.
 */
export interface RunRecord {
  id: string;
  conversationId: string;
  channelId: string;
  tenantId: string;
  /** `running` only while the run is in flight; one of the contract's statuses once stored. */
  status: RunStatus | "running";
  flowName: string;
  flowVersion: string | null;
  result: unknown;
  error: string | null;
  executionOrder: string[];
  startedAt: string;
  completedAt: string;
  durationMs: number;
}

/**
 * The conversation a run belongs to. `isNew` is true when the run starts it under a new id:
 * the storage then inserts it (failing if the id exists) rather than looking it up.
 */
export interface RunConversation {
  id: string;
  tenantId: string;
  channelId: string;
  isNew: boolean;
  /** The language a new conversation is started in (webhook channels); null or absent otherwise. */
  language?: string | null;
}

/**
 * Runs of one conversation take turns, in arrival order, on any instance: each takes a
 * ticket when it arrives ({@link Storage.beginRun}), and the conversation serves one ticket
 * at a time. The run being served holds a lease that it renews while it runs; when the
 * lease lapses (its instance stopped), the next run takes over ({@link Storage.claimTurn}).
 */
export interface RunTicket {
  /** The run's place in its conversation's queue (0 for the run that starts it). */
  ticket: number;
  /** Set when it was the run's turn at once and the turn is now claimed; null when it must wait. */
  claimed: ClaimedTurn | null;
}

/** What a run that holds its conversation's turn starts from. */
export interface ClaimedTurn {
  /** The conversation as its previous run left it (flow state, mode). */
  conversation: ConversationRecord;
  /** The run's user message as stored, with its turn index. */
  userMessage: MessageRecord;
}

/** A run arriving on its conversation: what {@link Storage.beginRun} stores if its turn comes at once. */
export interface BeginRunInput {
  conversation: RunConversation;
  /** The run while it runs (status `running`): its row, where the store writes it with the claim (see {@link Storage.findRun}). */
  run: RunRecord;
  /** The user's message, stored with the claim so history shows it while the run is in flight. */
  userMessage: NewMessage;
  /** ISO 8601 now, by the caller's clock. */
  now: string;
  /** ISO 8601 time until which the turn is held unless renewed. */
  leaseUntil: string;
  /**
   * Set on a channel with resumable streams: the run's stream is recorded from now, so the
   * run's row is written with its ticket even when it must wait for its turn. Given again to
   * {@link Storage.claimTurn}, it says so: the claim updates that row (keeping the stream's
   * lease), as {@link Storage.completeRun} does when the run ends before its turn.
   */
  stream?: { aliveUntil: string };
}

/** A run's claim on its conversation's turn: the row it writes and the lease it takes. */
export interface ClaimTurnInput extends BeginRunInput {
  ticket: number;
  /** ISO 8601 time until which the next ticket may claim its turn, when this claim takes over a lapsed one. */
  claimUntil: string;
}

/** Everything a finished run writes, applied in one transaction. */
export interface CompleteRunInput {
  run: RunRecord;
  conversation: RunConversation;
  ticket: number;
  /**
   * Whether the run held its turn ({@link Storage.claimTurn}). A run cancelled before its
   * turn came completes unclaimed: its user message is among `messages`, it leaves the flow
   * state and mode alone, and its ticket is skipped.
   */
  claimed: boolean;
  /** Messages in order; they get the next contiguous turn indexes. */
  messages: NewMessage[];
  /** New flow state when the key is present (even as `undefined`, which clears it); omit the key to keep the stored one. */
  flowState?: unknown;
  /**
   * A change of the conversation's mode (a handover, or the bot taking back an ended live
   * chat), applied only if the mode is still the one the run read; `undefined` keeps it.
   * The mode is entered at `at` even when it is the one read: a handover after a wait that
   * expired (still stored as waiting) starts a new wait.
   */
  mode?: ModeChange;
  /**
   * The turn index of the run's user message when a human had the conversation: it is
   * stored as a live-chat message (`origin: "livechat"`, `sender: "user"`), with the run.
   */
  liveChatUserTurn?: number;
  /**
   * The `livechat_message_id` that user message takes with {@link liveChatUserTurn} (the
   * messages of a live chat each have one); null when absent.
   */
  liveChatUserMessageId?: string;
  /** ISO 8601 time until which the next ticket may claim its turn before it is taken over. */
  claimUntil: string;
  /** A recorded stream's last events (SSE frames), written with the outcome: the stream ends with its run. */
  streamEnd?: string;
}

/**
 * A compare-and-set of a conversation's mode: applied only when the stored mode and the time
 * it was entered are still `from` and `since` (so that of two instances moving one
 * conversation, one wins and the other sees it did not). The new mode is entered at `at`.
 */
export interface ModeChange {
  from: ConversationMode;
  since: string;
  to: ConversationMode;
  /** ISO 8601. */
  at: string;
  /** The live chat's provider id: set when given (a string), kept when absent. */
  livechatConversationId?: string;
}

/**
 * A whole run of a new conversation, stored at once: a run answered as JSON that starts a
 * conversation has no observer until its answer (nobody else knows the conversation's id),
 * so its conversation, messages and outcome are written in one transaction at its end.
 */
export interface StoreRunInput {
  run: RunRecord;
  conversation: RunConversation;
  /** The user message first, then the produced messages; they get turn indexes from 0. */
  messages: NewMessage[];
  /** The flow state, when the run set one. */
  flowState?: unknown;
  /** The conversation's mode, when the run changed it (entered at the run's `completedAt`). */
  mode?: ConversationMode;
}

/**
 * A live-chat event applied to a conversation, in one transaction: a mode change
 * (compare-and-set, see {@link ModeChange}; `to` equal to `from` keeps the mode and its
 * time) and messages appended with the next turn indexes, as a run's are. Nothing is
 * written when the mode moved.
 */
export interface LiveChatUpdate {
  conversationId: string;
  change: ModeChange;
  messages: NewMessage[];
}

/** Which conversations a tenant's agents see: those in `modes`, longest in their mode first. */
export interface LiveChatQuery {
  tenantId: string;
  modes: ConversationMode[];
  limit: number;
}

/** When {@link Storage.countLiveChatWaiting} counts. */
export interface LiveChatWaitingQuery {
  /** ISO 8601: the time of the count; a wait longer than its channel's timeout by then has expired. */
  at: string;
  /** The wait of a channel without `livechatWaitTimeoutSeconds`, in milliseconds. */
  defaultWaitTimeoutMs: number;
}

/**
 * Messages between the instances sharing a database, by topic: what live delivery (an
 * agent's message reaching a user's subscription on another instance) rides on.
 * Best effort and small: a message is a doorbell (at most 4000 bytes of UTF-8) that tells
 * subscribers to read the store, which stays the truth; a subscriber that was away reads
 * what it missed from the store.
 */
export interface LiveFeed {
  /** Delivers `message` to the subscribers of `topic` on every instance, this one included. */
  publish(topic: string, message: string): Promise<void>;
  /** Calls `listener` with each message published on `topic` from now on; resolves once listening, to what stops it. */
  subscribe(topic: string, listener: (message: string) => void): Promise<() => void>;
  /** Stops listening and frees what the feed holds (a connection, a timer). */
  close(): Promise<void>;
}

/**
 * A run recorded on a channel with resumable streams, so that a client reconnecting to any
 * instance gets its whole stream. The stream is its run's: it opens with the run's ticket
 * ({@link BeginRunInput.stream}) and ends when the run does, its last events written with
 * the outcome ({@link CompleteRunInput.streamEnd}).
 */
export interface RunStreamRecord {
  runId: string;
  conversationId: string;
  /** ISO 8601 time the stream opened (its `data-run` event, made from its ids: chunks start at 1). */
  startedAt: string;
  /** Whether its run ended (it is no longer `running`). */
  ended: boolean;
  /** ISO 8601 time until which the instance running it vouches for it; renewed while it runs. */
  aliveUntil: string;
  /** ISO 8601 time a cancel was asked for, from any instance, or null. */
  cancelRequestedAt: string | null;
}

/** Events of a recorded stream, as the SSE frames sent: one write's worth. */
export interface RunStreamChunk {
  /** 1, 2, ... (the stream's first event, `data-run`, is not stored: it is made from the stream's ids). */
  seq: number;
  frames: string;
}

/**
 * Where streams of resumable channels are recorded, shared by every instance on the
 * database (see docs/streaming.md). A run whose stream ends within one flush writes nothing
 * here: its stream opens and ends in the run's own writes. A longer one writes a chunk per
 * batch of events, not per event.
 */
export interface RunStreamStore {
  /** Appends chunk `seq` (1, 2, ...) to the stream of a run in flight. */
  append(runId: string, seq: number, frames: string): Promise<void>;
  /**
   * Ends the stream of a run whose completion could not be stored: `frames` are its last
   * events, and the run, if still `running`, is stored `error` with `error` at `at`.
   */
  end(runId: string, frames: string, at: string, error: string): Promise<void>;
  /** The conversation's most recent recorded run still in flight (the highest ticket), or null. */
  findLive(conversationId: string): Promise<RunStreamRecord | null>;
  /**
   * Marks the stream as followed before a reader follows it: only then does its run's
   * completion store its last events (`completeRun`'s `streamEnd`), which only a follower
   * reads. False when the run is no longer in flight: the reader is then answered that
   * nothing streams. A store without it keeps every recorded stream's last events.
   */
  follow?(runId: string): Promise<boolean>;
  /**
   * The stream, its chunks after `afterSeq` in order and, once it ended, its last events
   * (`last`: null while it runs, or when it ended without them, its instance having
   * stopped, or when nobody followed it); null when the run is not recorded. A stream read
   * as ended has all its chunks.
   */
  read(runId: string, afterSeq: number): Promise<{ stream: RunStreamRecord; chunks: RunStreamChunk[]; last: string | null } | null>;
  /**
   * Extends the `aliveUntil` of these streams (those not ended), which the sweep
   * ({@link endLapsed} without a run) watches from their first renewal on; returns the ids
   * of those whose cancel was asked for.
   */
  renew(runIds: string[], aliveUntil: string): Promise<string[]>;
  /** Asks for the stream's run to be cancelled; false when it has ended (or is unknown). */
  requestCancel(runId: string, at: string): Promise<boolean>;
  /**
   * Ends the streams whose `aliveUntil` passed before `now` (their instance stopped): every
   * such stream renewed at least once, or, given `runId`, that one stream whether renewed or
   * not. Each one's run is stored `cancelled` with `error` at `now`, without last events.
   * Returns the streams it ended; of instances sweeping at once, one ends each.
   */
  endLapsed(now: string, error: string, runId?: string): Promise<RunStreamRecord[]>;
  /** Deletes the chunks of streams whose run ended before `before`. */
  prune(before: string): Promise<void>;
}

/** A keyed request's answer, as stored for its replays. */
export interface IdempotentResponse {
  /** The HTTP status answered. */
  status: number;
  /** `json`: `body` is the JSON document; `stream`: `body` is the stream's SSE frames, from `data-run` to its last event. */
  kind: "json" | "stream";
  body: string;
}

/**
 * A request sent with an `Idempotency-Key` (see docs/api.md, "Idempotent requests"), as
 * stored under its channel and key: the hash of its body, who holds it while it runs, then
 * its answer. Never the body itself.
 */
export interface IdempotencyRecord {
  channelId: string;
  key: string;
  /** Lowercase hex SHA-256 of the operation and the request's body. */
  requestHash: string;
  /** The claim of the request holding the key: a random value per request. */
  token: string;
  /** `running` while the request that claimed the key runs; `done` once its answer is stored. */
  state: "running" | "done";
  /** ISO 8601 time the key was claimed. */
  createdAt: string;
  /** ISO 8601 time after which the key is free again (a day after `createdAt`). */
  expiresAt: string;
  /** ISO 8601 time until which the request holding the key vouches for it; renewed while it runs. */
  lockedUntil: string;
  /** Its answer, once `done`. */
  response: IdempotentResponse | null;
}

/** A request claiming a key: {@link IdempotencyStore.claim}. */
export interface IdempotencyClaim {
  channelId: string;
  key: string;
  requestHash: string;
  token: string;
  /** ISO 8601 now, by the caller's clock. */
  now: string;
  expiresAt: string;
  lockedUntil: string;
}

/**
 * Where the keys of idempotent requests are kept, shared by every instance on the database,
 * so that a key sent to two instances runs once. A key is scoped to its channel. Every
 * method is one statement.
 */
export interface IdempotencyStore {
  /**
   * Claims the key for a request (`running`, held by `token`): when no record has it, when
   * its record expired (`expiresAt` passed, and it is not held by a request still running),
   * or when the request holding it let its lease lapse (`lockedUntil` passed) and this one
   * has the same `requestHash`. Returns `null` when claimed, else the record as it is (another
   * request's: running, or done with its answer). Of requests claiming one key at once, on
   * any instance, one claims it.
   */
  claim(claim: IdempotencyClaim): Promise<IdempotencyRecord | null>;
  /** Extends the lease of a key held by `token`; false when it no longer holds it. */
  renew(channelId: string, key: string, token: string, lockedUntil: string): Promise<boolean>;
  /** Stores the answer of the request holding the key with `token` (`done`); false when it no longer holds it. */
  complete(channelId: string, key: string, token: string, response: IdempotentResponse): Promise<boolean>;
  /** Frees a key held by `token` that has no answer (its request failed, or its run was stopped before its end). */
  release(channelId: string, key: string, token: string): Promise<void>;
  /** Deletes the records that expired before `before`, except a key still held by a request running. */
  prune(before: string): Promise<void>;
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
    | "livechatWaitTimeoutSeconds"
    | "runTimeoutSeconds"
    | "rateLimits"
    | "resumableStreams"
    | "widget"
    | "settings"
    | "sealedSettings"
    | "retentionDays"
  >
>;

/** A channel's signature settings, as {@link Storage.updateChannel} may expect to find them. */
export type SignatureSettings = Pick<ChannelRecord, "requireSignature" | "signingSecretEncrypted">;

/**
 * What {@link Storage.updateChannel} may expect to find: each field given is compared with the
 * stored one (`settings` as its JSON text, `null` as null), and the patch applied only when
 * all are still the same.
 */
export type ExpectedChannel = Partial<SignatureSettings & Pick<ChannelRecord, "settings" | "sealedSettings">>;

/** What an admin operation did, as the audit trail stores it. Never holds a key or a secret. */
export interface AuditEventRecord {
  id: string;
  /** ISO 8601 time of the operation. */
  timestamp: string;
  /** The tenant the operation acted on, or null when it is unknown (a channel id that matches nothing). */
  tenantId: string | null;
  channelId: string | null;
  /** Who: the admin token's subject over HTTP, the name given to `admin.as()`, `cli` for the command. */
  actor: string | null;
  /** Through what: the admin routes (`http`) or `service.admin` (the command included). */
  via: "http" | "service";
  /** `create_tenant`, `create_channel`, `update_channel`, `rotate_key` or `rotate_signing_secret`. */
  operation: string;
  /** The channel fields it changed, by their name in the channel view: `{ field: { from, to } }`. */
  changes: Record<string, { from: unknown; to: unknown }>;
  outcome: "success" | "failure";
  /** The error code of a failure, null on success. */
  errorCode: string | null;
}

/** Which audit events to read, newest first. */
export interface AuditQuery {
  /** Only this tenant's events; every tenant's when absent. */
  tenantId?: string;
  /** Only this channel's events. */
  channelId?: string;
  limit: number;
  /** Only events strictly older than this one (keyset pagination: its timestamp, then its id). */
  before?: { timestamp: string; id: string };
}

/** A conversation {@link Storage.deleteConversations} deleted, with how many of its rows went with it. */
export interface DeletedConversation {
  id: string;
  tenantId: string;
  channelId: string;
  /** Its messages deleted (live-chat messages included). */
  messages: number;
  /** Its runs deleted (their recorded streams with them). */
  runs: number;
}

/** What {@link Storage.deleteConversations} deletes, and how it records it. */
export interface DeleteConversationsInput {
  conversationIds: readonly string[];
  /** Only this tenant's conversations: another tenant's is left alone, as one that does not exist. */
  tenantId?: string;
  /** ISO 8601 now, by the caller's clock: a run whose lease has not lapsed by then is in flight. */
  now: string;
  /** The audit event to record in the same transaction, made from what was deleted (not called when nothing was). */
  audit?: (deleted: DeletedConversation[]) => AuditEventRecord;
}

/**
 * What {@link Storage.deleteConversations} did: `busy` names the conversations that have a run
 * in flight (a ticket served whose lease has not lapsed, or runs queued behind it); when it is
 * not empty nothing was deleted. An id that names no conversation (or another tenant's) is in
 * neither list.
 */
export interface DeleteConversationsResult {
  deleted: DeletedConversation[];
  busy: string[];
}

/** Which conversations {@link Storage.listConversations} reads, newest first (by `createdAt`, then `id`). */
export interface ConversationQuery {
  /** Only this tenant's; every tenant's when absent. */
  tenantId?: string;
  channelId?: string;
  /** Only those created at or after this ISO 8601 time. */
  since?: string;
  /** Only those created before this ISO 8601 time. */
  until?: string;
  /** Only these conversations (e.g. an end user's, from {@link Storage.findEndUserConversations}). */
  ids?: readonly string[];
  limit: number;
  /** Only those strictly older than this one (keyset pagination: its `createdAt`, then its `id`). */
  before?: { createdAt: string; id: string };
}

/** Whose conversations {@link Storage.findEndUserConversations} finds. */
export interface EndUserQuery {
  /** Matched exactly against the top-level `platform_user_id` and `external_user_id` of messages' metadata (`END_USER_METADATA_FIELDS`). */
  externalUserId: string;
  /** Only this tenant's conversations; every tenant's when absent. */
  tenantId?: string;
}

/** Which conversations {@link Storage.findEndedConversations} finds. */
export interface EndedConversationQuery {
  channelId: string;
  /** ISO 8601: only conversations with no activity since (`updatedAt`, and the time they entered their mode). */
  before: string;
  limit: number;
}

/** Which channels {@link Storage.listChannels} reads. */
export interface ChannelQuery {
  /** Only this tenant's channels; every tenant's when absent. */
  tenantId?: string;
}

/** The operations core needs from a database. */
export interface Storage {
  /**
   * Finds a key by the hash of its string, with its channel, in one query. The key and its
   * channel may be frozen records that the store hands to every request while their rows are
   * unchanged (as `@channelkit/kysely` does; on SQLite it then reads no row at all until
   * something changes them): treat them as read-only.
   */
  findKeyByHash(hash: string): Promise<KeyWithChannel | null>;
  findConversation(id: string): Promise<ConversationRecord | null>;
  /** The most recent `limit` messages of a conversation, oldest first. */
  listRecentMessages(conversationId: string, limit: number): Promise<MessageRecord[]>;
  /**
   * Registers a run on its conversation: creates the conversation when `conversation.isNew`,
   * and takes the run's ticket. When it is the run's turn at once (no other run of the
   * conversation is queued or in flight), claims it as {@link claimTurn} does, in the same
   * transaction. An existing conversation that is not there, or is another tenant's or
   * channel's than `conversation` says, takes no ticket: the answer is null (the channel's
   * 404), so that a run on a conversation named by its client needs no read before it.
   */
  beginRun(input: BeginRunInput): Promise<RunTicket | null>;
  /**
   * Claims the run's turn when its ticket is the one served: stores its user message and its
   * `running` row (a store may write the row of a run that is not recorded with its outcome
   * instead: see {@link findRun}), and takes the lease. When the run being served let its
   * lease lapse (its instance stopped), that run is stored `cancelled` and its turn passes on
   * first. Returns null when it is not yet this run's turn; throws {@link TurnPassedOver} when
   * the conversation serves a later ticket (this one's turn came and was taken over). Never
   * holds a connection between calls.
   */
  claimTurn(input: ClaimTurnInput): Promise<ClaimedTurn | null>;
  /** Extends the lease of the run holding the turn; false when the run no longer holds it. */
  renewTurn(conversationId: string, ticket: number, leaseUntil: string): Promise<boolean>;
  /**
   * Stores a finished run and appends its messages with contiguous turn indexes, in one
   * transaction: concurrent calls on one conversation, from any number of processes, never
   * leave a gap or a duplicate. Passes the turn to the next ticket. Returns the messages as
   * stored.
   */
  completeRun(input: CompleteRunInput): Promise<MessageRecord[]>;
  /**
   * Stores a whole run that started a new conversation, in one transaction: the
   * conversation (its queue past ticket 0), the messages from turn 0, the run (ticket 0).
   * Fails, storing nothing, when the conversation's id exists.
   */
  storeRun(input: StoreRunInput): Promise<MessageRecord[]>;
  /**
   * A run by its id. A recorded run ({@link BeginRunInput.stream}) is found from its ticket
   * on. Another is found from its claim where the store writes its `running` row then
   * (`postgres()`), or once it ended where the row is written with its outcome (`sqlite()`,
   * `memoryStorage()`: a write less before a stream's first event); either way a run lost with
   * its instance is stored `cancelled` when the next run takes its lapsed turn over.
   */
  findRun(id: string): Promise<RunRecord | null>;

  /**
   * Applies a live-chat event (see {@link LiveChatUpdate}): null, writing nothing, when the
   * conversation is not in `change.from` since `change.since` any more (or does not exist).
   */
  updateLiveChat(input: LiveChatUpdate): Promise<{ conversation: ConversationRecord; messages: MessageRecord[] } | null>;
  /** Conversations of a tenant in the given modes, longest in their mode first. */
  listLiveChatConversations(query: LiveChatQuery): Promise<ConversationRecord[]>;
  /**
   * How many conversations, of every tenant, wait for a live-chat agent at `query.at`: in
   * `livechat_waiting` since less than their channel's wait (`livechatWaitTimeoutSeconds`, else
   * `query.defaultWaitTimeoutMs`), as `modeAt` reads them; a wait that expired unwritten is not
   * counted. What the `channelkit.livechat.waiting` gauge reads at each collection: a count on
   * the index of the conversations' modes. Optional: without it, there is no such gauge.
   */
  countLiveChatWaiting?(query: LiveChatWaitingQuery): Promise<number>;
  /** Messages of a conversation after `afterTurn` (exclusive), oldest first, at most `limit`. */
  listMessagesAfter(conversationId: string, afterTurn: number, limit: number): Promise<MessageRecord[]>;
  /**
   * The feed between the instances on this database (Postgres `LISTEN/NOTIFY`, an SQLite
   * table); absent, the service uses one within its own process only.
   */
  readonly feed?: LiveFeed;
  /**
   * Whether the store announces on its {@link feed}, on the topic `TURN_PASSED_TOPIC`, that a
   * conversation's turn passed to a run waiting for it: the runs waiting on other instances
   * are then woken at once rather than at their next look at the queue.
   */
  readonly announcesTurns?: boolean;
  /** Where the rate limits count, shared by every instance on this database; without one they count in each process's memory. */
  readonly rateLimits?: RateLimitStore;
  /** Where streams of resumable channels are recorded; without one, no stream can be resumed. */
  readonly runStreams?: RunStreamStore;
  /** Where the keys of idempotent requests are kept; without one, each process keeps them in its memory. */
  readonly idempotency?: IdempotencyStore;

  /** Creates a tenant; with `audit`, records the event in the same transaction. */
  createTenant(tenant: TenantRecord, audit?: AuditEventRecord): Promise<void>;
  findTenant(id: string): Promise<TenantRecord | null>;
  countTenants(): Promise<number>;
  /** Every tenant, oldest first (by `createdAt`, then `id`). */
  listTenants(): Promise<TenantRecord[]>;
  /** Creates a channel and its first key (and records `audit`) in one transaction. */
  createChannel(channel: ChannelRecord, key: ApiKeyRecord, audit?: AuditEventRecord): Promise<void>;
  findChannel(id: string): Promise<ChannelRecord | null>;
  /** The webhook channel whose public `client_id` this is; as with {@link findKeyByHash}, possibly a frozen, shared record. */
  findChannelByClientId(clientId: string): Promise<ChannelRecord | null>;
  /** Channels, archived ones included, oldest first (by `createdAt`, then `id`): one tenant's with `tenantId`, else every tenant's. */
  listChannels(query?: ChannelQuery): Promise<ChannelRecord[]>;
  /**
   * Applies a patch to a channel that is not archived (archived is final) and records
   * `audit` with it, in one transaction. Null, changing nothing, when no such channel exists
   * or it is archived, or when `expected` is given and a field it names is no longer as
   * given: the admin turning signatures on reads them first, and two PATCHes at once must not
   * each hand out a secret of their own; an update of a plugin type's settings merges into
   * those it read, and must not lose another's merged meanwhile.
   */
  updateChannel(id: string, patch: ChannelPatch, updatedAt: string, audit?: AuditEventRecord, expected?: ExpectedChannel): Promise<ChannelRecord | null>;
  /**
   * Revokes every active key of a channel that is not archived, stores the new one and
   * records `audit`, in one transaction. False, changing nothing, when no such channel
   * exists or it is archived.
   */
  replaceChannelKey(channelId: string, key: ApiKeyRecord, revokedAt: string, audit?: AuditEventRecord): Promise<boolean>;
  /** Records an admin operation that was refused (its successes are recorded with their writes). */
  appendAuditEvent(event: AuditEventRecord): Promise<void>;
  /** Audit events, newest first (by timestamp, then id). */
  listAuditEvents(query: AuditQuery): Promise<AuditEventRecord[]>;

  /**
   * Deletes conversations and every row that belongs to them, in one transaction: their
   * messages, runs, recorded streams' chunks, the idempotency records whose stored answer
   * names them, the plugin store's values whose key names them, and the conversations'
   * own rows (their flow state and live-chat state); records `audit` with it. Deletes
   * nothing when one of them has a run in flight ({@link DeleteConversationsResult.busy}).
   * Optional for a storage of your own: without it, conversations cannot be deleted.
   */
  deleteConversations?(input: DeleteConversationsInput): Promise<DeleteConversationsResult>;
  /**
   * The ids of the conversations in which a message's metadata names the end user (see
   * {@link EndUserQuery}), oldest first. Optional, as {@link deleteConversations} is.
   */
  findEndUserConversations?(query: EndUserQuery): Promise<string[]>;
  /**
   * The ids of at most `query.limit` of a channel's conversations that ended before
   * `query.before` (no activity since, and not waiting for or talking with a live-chat agent),
   * in no particular order: what the retention sweep deletes. Optional, as
   * {@link deleteConversations} is.
   */
  findEndedConversations?(query: EndedConversationQuery): Promise<string[]>;
  /** Conversations, newest first (by `createdAt`, then `id`). Optional, as {@link deleteConversations} is. */
  listConversations?(query: ConversationQuery): Promise<ConversationRecord[]>;

  /**
   * Brings the schema up to date: channelkit's migrations, then those of the plugins passed
   * (each plugin's by name, recorded as `<plugin id>/<name>`). Stores without SQL tables
   * (memory) refuse a plugin with migrations.
   */
  migrate(options?: MigrateOptions): Promise<void>;
  /**
   * The key-value and lease store of the plugin `pluginId`, shared by every instance on the
   * database: every store has one (the memory storage's is the process's). Two plugins never
   * see each other's keys or leases.
   */
  pluginStore(pluginId: string): PluginStore;
  /**
   * Which migrations the database lacks, or has that this version does not know, read without
   * changing anything. `createChannelService` asks it at start-up and refuses to start on a
   * schema that is missing or behind, saying how to migrate. Optional: a storage without it
   * (one of your own) is not checked.
   */
  schemaStatus?(options?: MigrateOptions): Promise<SchemaStatus>;
  close(): Promise<void>;
}

/** The plugins whose tables {@link Storage.migrate} brings up to date beside channelkit's. */
export interface MigrateOptions {
  plugins?: readonly { id: string; schema?: PluginSchema | undefined }[];
}

/** What {@link Storage.schemaStatus} finds: the database's schema against the migrations this version knows. */
export interface SchemaStatus {
  /** Every migration this version knows, in the order they apply (e.g. `0001_initial`). */
  known: string[];
  /** Those not applied yet, in order: all of them on a database never migrated, none when up to date. */
  pending: string[];
  /** Applied migrations this version does not know: the database was migrated by a newer version (harmless while migrations only add). */
  unknown: string[];
}
