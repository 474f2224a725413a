import type { Generated } from "kysely";

/**
 * The tables, as Kysely sees them. Types are portable on purpose (text, integer): the same
 * migration runs on SQLite and Postgres. JSON is stored as text; booleans as 0/1; times as
 * ISO 8601 text, which sorts like the times it writes.
 */
export interface Database {
  tenants: TenantsTable;
  channels: ChannelsTable;
  api_keys: ApiKeysTable;
  conversations: ConversationsTable;
  messages: MessagesTable;
  runs: RunsTable;
  audit_events: AuditEventsTable;
  /** SQLite only: the live feed between processes sharing the file (Postgres uses `NOTIFY`). */
  live_feed: LiveFeedTable;
  run_stream_chunks: RunStreamChunksTable;
  idempotency_keys: IdempotencyKeysTable;
  plugin_kv: PluginKvTable;
  plugin_leases: PluginLeasesTable;
}

/** A plugin's value (`storage.pluginStore(id)`): its JSON text, and when it expires (null: never). */
export interface PluginKvTable {
  plugin_id: string;
  key: string;
  value: string;
  expires_at: string | null;
}

/** A plugin's lease: who holds it, until when. */
export interface PluginLeasesTable {
  plugin_id: string;
  name: string;
  holder: string;
  expires_at: string;
}

/** A request's `Idempotency-Key` in its channel: the hash of its body, its holder while it runs, then its answer. */
export interface IdempotencyKeysTable {
  channel_id: string;
  idempotency_key: string;
  request_hash: string;
  token: string;
  /** `running` or `done`. */
  state: string;
  created_at: string;
  expires_at: string;
  locked_until: string;
  response_status: number | null;
  /** `json` or `stream`. */
  response_kind: string | null;
  response_body: string | null;
}

/** A recorded stream's events before its last ones (those are on its run's row): one row per write, the SSE frames as sent. */
export interface RunStreamChunksTable {
  run_id: string;
  seq: number;
  frames: string;
}

export interface LiveFeedTable {
  id: Generated<number>;
  topic: string;
  message: string;
  created_at: string;
}

interface TenantsTable {
  id: string;
  name: string;
  created_at: string;
}

export interface ChannelsTable {
  id: string;
  tenant_id: string;
  name: string | null;
  type: string;
  mode: string;
  environment: string;
  state: string;
  flow_name: string;
  allowed_origins: string;
  default_stream: number;
  require_signature: number;
  signing_secret_encrypted: string | null;
  api_key_hint: string | null;
  client_id: string | null;
  languages: string;
  livechat_messages: string;
  created_at: string;
  updated_at: string;
  /** JSON text, `{}` for a channel created before the widget settings existed. */
  widget: Generated<string>;
  livechat_wait_timeout_seconds: number | null;
  run_timeout_seconds: number | null;
  /** JSON text of the channel's own rate limits, or null for the service's. */
  rate_limits: string | null;
  /** 1 when streamed runs can be resumed. */
  resumable_streams: Generated<number>;
  /** JSON text of a plugin type's settings that are not secrets; `{}` for the built-in types. */
  settings: Generated<string>;
  /** The type's secret settings, one JSON object sealed with the master key; null when none is set. */
  sealed_settings: string | null;
  /** Days after which an ended conversation is deleted by the retention sweep; null: kept for ever. */
  retention_days: number | null;
}

export interface ApiKeysTable {
  id: string;
  channel_id: string;
  tenant_id: string;
  hash: string;
  prefix: string;
  environment: string;
  hint: string;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
}

export interface ConversationsTable {
  id: string;
  tenant_id: string;
  channel_id: string;
  mode: string;
  flow_state: string | null;
  next_turn: number;
  livechat_conversation_id: string | null;
  created_at: string;
  updated_at: string;
  next_ticket: Generated<number>;
  language: string | null;
  serving: Generated<number>;
  lease_until: string | null;
  /** When the conversation entered its mode; null only for rows of a database older than it, read as `created_at`. */
  mode_since: string | null;
}

export interface MessagesTable {
  conversation_id: string;
  turn_index: number;
  origin: string;
  role: string;
  content: string;
  timestamp: string;
  token_count: number;
  run_id: string | null;
  step_id: string | null;
  node_type: string | null;
  tool_calls: string | null;
  tool_call_id: string | null;
  livechat_message_id: string | null;
  sender: string | null;
  /** JSON, or null. */
  metadata: string | null;
}

export interface RunsTable {
  id: string;
  conversation_id: string;
  channel_id: string;
  tenant_id: string;
  status: string;
  flow_name: string;
  flow_version: string | null;
  result: string | null;
  error: string | null;
  execution_order: string;
  started_at: string;
  completed_at: string;
  duration_ms: number;
  ticket: number | null;
  /** A recorded stream's (resumable channels): until when its instance vouches for it; null when the run is not recorded. */
  stream_alive_until: string | null;
  /** A recorded stream's: 1 once its instance renewed it (the sweep's index holds it from then). */
  stream_renewed: number | null;
  /** A recorded stream's: when a cancel was asked for, from any instance. */
  stream_cancel_requested_at: string | null;
  /** A recorded stream's last events (SSE frames), written with its outcome when it was followed. */
  stream_tail: string | null;
  /** A recorded stream's: 1 once a reader followed it (a resume); its outcome then stores its last events. */
  stream_followed: number | null;
}

export interface AuditEventsTable {
  id: string;
  timestamp: string;
  tenant_id: string | null;
  channel_id: string | null;
  actor: string | null;
  via: string;
  operation: string;
  /** JSON text. */
  changes: string;
  outcome: string;
  error_code: string | null;
}

/**
 * `columns` when it names every column of `Table` (a compile-time check both ways): the
 * request path selects explicit columns, never `*`, so that a column another process's
 * migration adds does not change what its statements return.
 */
function everyColumn<Table>() {
  return <const Columns extends readonly (keyof Table & string)[]>(
    ...columns: Columns & ([Exclude<keyof Table, Columns[number]>] extends [never] ? unknown : { missing: Exclude<keyof Table, Columns[number]> })
  ): Columns => columns;
}

export const CHANNEL_COLUMNS = everyColumn<ChannelsTable>()(
  "id",
  "tenant_id",
  "name",
  "type",
  "mode",
  "environment",
  "state",
  "flow_name",
  "allowed_origins",
  "default_stream",
  "require_signature",
  "signing_secret_encrypted",
  "api_key_hint",
  "client_id",
  "languages",
  "livechat_messages",
  "created_at",
  "updated_at",
  "widget",
  "livechat_wait_timeout_seconds",
  "run_timeout_seconds",
  "rate_limits",
  "resumable_streams",
  "settings",
  "sealed_settings",
  "retention_days",
);

export const CONVERSATION_COLUMNS = everyColumn<ConversationsTable>()(
  "id",
  "tenant_id",
  "channel_id",
  "mode",
  "flow_state",
  "next_turn",
  "livechat_conversation_id",
  "created_at",
  "updated_at",
  "next_ticket",
  "serving",
  "lease_until",
  "language",
  "mode_since",
);

export const MESSAGE_COLUMNS = everyColumn<MessagesTable>()(
  "conversation_id",
  "turn_index",
  "origin",
  "role",
  "content",
  "timestamp",
  "token_count",
  "run_id",
  "step_id",
  "node_type",
  "tool_calls",
  "tool_call_id",
  "livechat_message_id",
  "sender",
  "metadata",
);

export const RUN_COLUMNS = everyColumn<RunsTable>()(
  "id",
  "conversation_id",
  "channel_id",
  "tenant_id",
  "status",
  "flow_name",
  "flow_version",
  "result",
  "error",
  "execution_order",
  "started_at",
  "completed_at",
  "duration_ms",
  "ticket",
  "stream_alive_until",
  "stream_renewed",
  "stream_cancel_requested_at",
  "stream_tail",
  "stream_followed",
);
