/**
 * The wire's shapes, in the wire's names: what the client sends and what the service answers.
 * Written by hand from the contract (docs/api.md) and the routes of
 * `@channelkit/core`, so the client depends on nothing but `eventsource-parser`.
 */

/** How a run ended: `pending` when the flow paused (a question, a live-chat handover). */
export type RunStatus = "success" | "error" | "pending" | "cancelled";

/** A conversation's mode, as history and the live-chat routes report it. */
export type ConversationMode =
  | "bot"
  | "livechat_waiting"
  | "livechat_active"
  | "livechat_closed"
  | "livechat_expired"
  | "livechat_cancelled"
  | "livechat_unavailable";

/** Body of `execute` and `stream` (`POST /public/v1/api/execute`), without `stream`: the method chooses. */
export interface ExecuteBody {
  /** The user's message: 1 to 10,000 characters. */
  payload: string;
  /** A conversation to go on with; omit it to start a new one. */
  conversation_id?: string;
  /** Free contextual data, given to the flow (at most 16,384 characters of JSON). */
  metadata?: Record<string, unknown>;
}

/** The ids of a run: the `data` of a stream's first chunk, `data-run`. */
export interface RunIds {
  run_id: string;
  conversation_id: string;
}

/** The JSON answer of `execute`: one finished run. */
export interface RunDocument {
  run_id: string;
  conversation_id: string;
  status: RunStatus;
  output: {
    /** What the flow returned; its shape is the flow's. */
    result: unknown;
    /** The flow's error message when the run failed. */
    error: string | null;
    /** The assistant messages of this run only. */
    messages: { role: "assistant"; content: string }[];
    metadata: {
      channel_id: string;
      flow_id: string;
      flow_name: string;
      flow_version: string | null;
      environment: string;
      /** Step names, in the order they ran. */
      execution_order: string[];
      started_at: string;
      completed_at: string;
      /** `livechat_waiting` when the run handed over to live chat, else null. */
      livechat_mode: ConversationMode | null;
    };
  };
  /** Always set by channelkit's server (the contract allows null; it never answers it). */
  usage: { total_nodes: number; duration_ms: number };
  /** Set when `status` is `error`: `{ code: "flow_error", message }`. */
  error: { code: string; message: string } | null;
}

/** A tool call stored on an assistant message. */
export interface ToolCall {
  id: string;
  name: string;
  arguments: unknown;
}

/** One message of a conversation, as history and the live-chat subscription show it. */
export interface HistoryMessage {
  /** `agent`: produced by a run; `livechat`: the human side's, or the user's to it. */
  origin: "agent" | "livechat";
  role: "user" | "assistant" | "system" | "tool";
  content: string;
  timestamp: string;
  /** Position in the conversation, from 0. */
  turn_index: number;
  token_count: number;
  run_id: string | null;
  step_id: string | null;
  node_type: string | null;
  tool_calls: ToolCall[] | null;
  tool_call_id: string | null;
  livechat_message_id: string | null;
  /** The live-chat sender (`user`, `agent`, `supervisor`, `bot`, `system`) when `origin` is `livechat`. */
  sender: string | null;
  /** A channel's own data of the message, present only on a message that has any (a chat platform's user, message and thread ids). */
  metadata?: Record<string, unknown>;
}

/** A conversation's live chat as it is now. */
export interface LiveChatState {
  mode: ConversationMode;
  /** The channel's status message for the mode, or null. */
  livechat_status_message: string | null;
  /** The id of the current or last live chat, or null. */
  livechat_conversation_id: string | null;
}

/** The answer of `history` (`GET /public/v1/api/conversations/{id}/messages`). */
export interface History extends LiveChatState {
  /** The path's `session_id`, echoed as it was written (the conversation's id). */
  session_id: string;
  /** Oldest first. */
  messages: HistoryMessage[];
  total_messages: number;
  total_tokens: number;
}

/** What the cancel routes answer when a run was in flight; `null` from the client on 204 (nothing in flight). */
export interface CancelledRun {
  run_id: string;
  conversation_id: string;
  /** How the run was stored (`cancelled`, or how it ended first), or `cancelling` (202) when not stored within 10 s. */
  status: RunStatus | "cancelling";
}

/** The answer of the live-chat cancel (`POST …/livechat/cancel`). */
export interface LiveChatCancelled extends LiveChatState {
  conversation_id: string;
}

/** An event of the live-chat subscription (`GET /public/v1/api/conversations/{id}/events`). */
export type LiveChatEvent = ({ type: "mode" } & LiveChatState) | { type: "message"; message: HistoryMessage };

/** An event of the webhook channel: `START`, or a reply of the flow. */
export type WebhookEvent =
  | { type: "START"; data: Record<string, never>; timestamp: string }
  | {
      type: "BOT_MESSAGE";
      data: {
        /** The reply as HTML, its text escaped. */
        content: string;
        /** The reply's text as the flow wrote it. */
        rawContent: string;
        suggestions: string[];
        expectedResponseType: string;
        sources: unknown[];
      };
      timestamp: string;
    };

/** The webhook conversation record. */
export interface WebhookConversation {
  /** Keep it for `newMessage`. */
  id: string;
  eventStack: WebhookEvent[];
  context: {
    variables: Record<string, unknown>;
    uploadedFiles: Record<string, unknown>;
    channel: { id: string; version: string | null; release: string; languages: string[]; channelType: string };
    language: string;
    shouldClassifyNextMessage: boolean;
    digressionTypeNextMessage: string;
    graphReaderConversationalStack: {
      status: { executorType: string; statusType: string; nodeId?: string; flagName?: string };
      context: { scenarioName?: string };
    }[];
    nextMessageExpectedType: string;
    entities: unknown[];
  };
  /** `ACTIVE`, or `HANDOVER` when the start handed over to live chat. */
  status: string;
  labelIds: string[];
  createdAt: string;
  updatedAt: string;
}

/** Body of `webhook(clientId).startConversation()`, in the webhook's own names. */
export interface StartConversationBody {
  /** One of the channel's languages, `xx_XX`. */
  language: string;
  /** Given to the flow's `start` as its metadata. */
  integrationContext?: Record<string, unknown>;
}

/** The answer of `startConversation`. */
export interface StartConversationResponse {
  conversation: { conversation: WebhookConversation; newMessages: { newEvents: WebhookEvent[] } };
}

/** Body of `webhook(clientId).newMessage()`. */
export interface NewMessageBody {
  /** The `id` that `startConversation` answered. */
  conversationId: string;
  /** The user's message: 1 to 10,000 characters. */
  userInput: string;
}

/** The answer of `newMessage`: the replies of this call. */
export interface NewMessageResponse {
  conversation: { newEvents: WebhookEvent[] };
}

/** A rate limit in the wire's names, `false` for none. */
export type RateLimitRule = { requests: number; window_seconds: number } | false;

/** A channel's own rate limits, in the wire's names. */
export interface ChannelRateLimits {
  publishable_key?: RateLimitRule;
  server_key?: RateLimitRule;
  client_address?: RateLimitRule;
  webhook_client?: RateLimitRule;
}

/** A channel as the admin routes show it: never a key or a secret. */
export interface ChannelView {
  id: string;
  tenant_id: string;
  name: string | null;
  /** `api`, `webhook`, or a channel type a plugin of the service registers (e.g. `telegram`). */
  type: "api" | "webhook" | (string & {});
  mode: "server" | "public";
  environment: "prod" | "dev" | "staging";
  state: "active" | "inactive" | "archived";
  flow: string;
  api_key_hint: string;
  has_signing_secret: boolean;
  config: { require_signature: boolean };
  allowed_origins: string[];
  default_stream: boolean;
  widget: WidgetSettings;
  livechat: { status_messages: Partial<Record<ConversationMode, string>>; wait_timeout_seconds: number | null };
  run_timeout_seconds: number | null;
  /** Days after which an ended conversation is deleted by the retention sweep; null: kept for ever. */
  retention_days: number | null;
  resumable_streams: boolean;
  rate_limits: ChannelRateLimits;
  /** Webhook channels only. */
  client_id?: string;
  /** Webhook channels only. */
  languages?: string[];
  /** Channels of a plugin's type only: the type's settings that are not secrets. */
  settings?: Record<string, unknown>;
  /** Channels of a plugin's type only: the names of its secret settings that are set (never their values); null when the service's master key cannot open them. */
  secrets?: string[] | null;
  created_at: string;
  updated_at: string;
}

/** A channel's widget settings (what it overrides of the defaults): see docs/widget.md. */
export interface WidgetSettings {
  strings?: Record<
    string,
    Partial<Omit<WidgetStrings, "errors" | "livechat">> & { errors?: Partial<WidgetStrings["errors"]>; livechat?: Partial<WidgetStrings["livechat"]> }
  >;
  theme?: Partial<WidgetConfig["theme"]>;
  features?: Partial<WidgetConfig["features"]>;
}

/** Body of `admin(tenantId).updateChannel()` (`PATCH /api/v1/channels/{id}`): every field optional; any other is a 422. */
export interface ChannelPatch {
  name?: string | null;
  /** `archived` is final. */
  state?: "active" | "inactive" | "archived";
  /** Exact origins, replacing the list. */
  allowed_origins?: string[];
  default_stream?: boolean;
  /** Language codes such as `en_US`. */
  languages?: string[];
  /** Replaces the whole set. */
  widget?: WidgetSettings;
  /** 1 to 86400, null for the default (300). */
  run_timeout_seconds?: number | null;
  /** 1 to 36500 days, null to keep ended conversations for ever. */
  retention_days?: number | null;
  resumable_streams?: boolean;
  /** Replaces the channel's whole set; null takes the service's again. */
  rate_limits?: ChannelRateLimits | null;
  livechat?: { status_messages?: Partial<Record<ConversationMode, string>>; wait_timeout_seconds?: number | null };
  /** Turning `require_signature` from false to true answers a `signing_secret`, once. */
  config?: { require_signature?: boolean };
  /**
   * A plugin type's settings, merged into the stored ones (`null` removes a field) and checked
   * by the type's schema; a secret sent is sealed anew (its rotation). Refused on `api` and `webhook` channels.
   */
  settings?: Record<string, unknown>;
}

/** The answer of `rotateKey`: the new key, shown once. */
export interface RotatedKey {
  api_key: string;
  channel: { id: string; api_key_hint: string };
}

/** The answer of `rotateSigningSecret`: the new secret, shown once. */
export interface RotatedSigningSecret {
  signing_secret: string;
  channel: { id: string; has_signing_secret: boolean };
}

/** The answer of `updateChannel`: `signing_secret` only when `require_signature` went from false to true. */
export interface UpdatedChannel {
  channel: ChannelView;
  signing_secret?: string;
}

/** One event of the audit trail. */
export interface AuditEvent {
  id: string;
  timestamp: string;
  tenant_id: string;
  channel_id: string | null;
  actor: string;
  via: "http" | "service";
  operation: string;
  changes: Record<string, { from: unknown; to: unknown }>;
  outcome: "success" | "failure";
  error_code: string | null;
}

/** A page of the audit trail, newest first. */
export interface AuditPage {
  events: AuditEvent[];
  /** Pass it as `cursor` for the next page; null on the last. */
  next_cursor: string | null;
}

/** The widget's texts in one language. */
export interface WidgetStrings {
  title: string;
  subtitle: string;
  greeting: string;
  placeholder: string;
  send: string;
  retry: string;
  open: string;
  close: string;
  suggestions: string[];
  errors: Record<"network" | "origin_not_allowed" | "channel_inactive" | "channel_archived" | "invalid_api_key" | "generic", string>;
  livechat: Record<Exclude<ConversationMode, "bot"> | "leave" | "agent", string>;
}

/** The answer of `widget.config()` (`GET /public/widget/config`). */
export interface WidgetConfig {
  channel_id: string;
  /** The language the strings are in. */
  locale: string;
  languages: string[];
  strings: WidgetStrings;
  theme: { primary_color: string; position: "bottom-right" | "bottom-left"; color_scheme: "light" | "dark" | "auto" };
  features: { suggestions: boolean; history: boolean; livechat: boolean };
  default_stream: boolean;
}

/** Body of `widget.chat()`: execute's body, or the AI SDK chat request `useChat` sends. */
export type WidgetChatBody =
  | ExecuteBody
  | {
      /** The chat id: bound to a conversation of the channel the first time it is seen. */
      id: string;
      /** The user's text is the text parts of the last `user` message. */
      messages: { id?: string; role: "user" | "assistant" | "system"; parts: ({ type: "text"; text: string } | { type: string; [key: string]: unknown })[] }[];
      trigger?: "submit-message" | "regenerate-message";
      messageId?: string;
    };
