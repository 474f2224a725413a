import { z } from "zod";
import { historyQuerySchema } from "../channels/api/schemas.js";
import { widgetConfigQuerySchema } from "../channels/widget/schemas.js";
import { auditRouteQuerySchema } from "../admin/schemas.js";
import { inboxConversationQuerySchema, inboxListQuerySchema } from "../livechat/inbox/schemas.js";
import { SIGNED_HEADERS } from "../http/cors.js";
import type { ErrorCode } from "../http/errors.js";
import type { RequestComponent, ResponseComponent } from "./components.js";

/** Path of the document as the service serves it (under its `basePath`). */
export const OPENAPI_PATH = "/public/v1/openapi.json";

/** How a route is authenticated. */
export type Security = "channelKey" | "publishableKey" | "admin" | "bridge" | "none";

/** A parameter of a route: in its path, its query or its headers. */
export interface ParameterSpec {
  name: string;
  in: "path" | "query" | "header";
  description: string;
  required?: boolean;
  /** The value's schema (a query's integer, not the string it is sent as); a string when absent. */
  schema?: z.ZodType;
}

/** A success answer of a route. */
export interface SuccessSpec {
  description: string;
  /** `application/json`: the component of its body. */
  json?: ResponseComponent;
  /** `text/event-stream`: the component of one of its events. */
  sse?: ResponseComponent;
  /** A body of another media type or shape, described by its text (a string, unless `schema` says otherwise). */
  other?: { mediaType: string; description: string; schema?: Record<string, unknown> };
  /** Headers this answer always carries, by component name. */
  headers?: HeaderName[];
  /** Headers it carries in some cases only (e.g. a stream's, on a route that may answer JSON). */
  optionalHeaders?: HeaderName[];
  /** Headers it always carries with exactly this value (or one of these). */
  values?: Partial<Record<HeaderName, string | string[]>>;
}

/** The response headers the document describes, by component name. */
export type HeaderName =
  | "Access-Control-Allow-Headers"
  | "Access-Control-Allow-Methods"
  | "Access-Control-Max-Age"
  | "Connection"
  | "Cache-Control-Stream"
  | "Cache-Control-No-Store"
  | "Cache-Control-Public"
  | "X-Accel-Buffering"
  | "X-Vercel-AI-UI-Message-Stream"
  | "ETag"
  | "Idempotent-Replayed";

/** One operation of the document: a route of the service and everything it may answer. */
export interface OperationSpec {
  method: "get" | "head" | "post" | "patch" | "options";
  /** The route's path, `{name}` for a parameter. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tag: Tag;
  /** The plugin that mounts the route, when the service does not always mount it. */
  plugin?: string;
  security: Security;
  parameters?: ParameterSpec[];
  body?: { component: RequestComponent; required: boolean; description?: string };
  /** The success answers, by status. */
  responses: Record<number, SuccessSpec>;
  /** Every error code the route may answer in the envelope; each status gets those of its codes. */
  errors: ErrorCode[];
  /** Whether its 404 is history's `{ detail }` (a conversation it cannot see) rather than the envelope. */
  detailNotFound?: boolean;
  /** Whether it counts against a rate limit (`RateLimit` headers on its answers). */
  counted?: boolean;
  /** A CORS preflight: its `Access-Control-Allow-Methods` names the path's methods. */
  preflight?: boolean;
}

/** The tags of the document, in the order they are listed. */
export const TAGS = {
  api: { name: "API channel", description: "Execute a flow and read a conversation, with a server key or a publishable key." },
  streams: { name: "Resumable streams", description: "On a channel with `resumable_streams`: follow the run in flight from any instance, or stop it." },
  livechat: { name: "Live chat", description: "The user's side of a handover to a human: the conversation's live chat as events, and leaving it." },
  widget: { name: "Widget", description: "The embeddable chat widget's routes, publishable keys only." },
  webhook: {
    name: "Webhook channel",
    description: "Two unauthenticated routes scoped by a channel's `client_id` (a signature when the channel requires one).",
  },
  admin: { name: "Admin", description: "Channel settings, keys, signing secrets and the audit trail, behind an admin JWT: mounted by `adminApi()`." },
  inbox: { name: "Live-chat inbox", description: "The built-in agent inbox behind an admin JWT: mounted by `liveChatInbox()`." },
  bridge: { name: "Live-chat bridge", description: "The help desk's events, signed: mounted by `liveChatWebhookBridge()`." },
  service: { name: "Service", description: "This document, and the widget's script (`widgetAsset()` of `@channelkit/widget`)." },
} as const;

/** A tag's key. */
export type Tag = keyof typeof TAGS;

/** Checks 1 to 5 of execute: a channel key of an active API channel of the right environment, and an allowed origin. */
const CHANNEL_KEY: ErrorCode[] = [
  "missing_api_key",
  "invalid_api_key",
  "wrong_channel_type",
  "channel_archived",
  "channel_inactive",
  "environment_mismatch",
  "origin_not_allowed",
  "rate_limited",
  "runtime_error",
];
/** The widget's routes: {@link CHANNEL_KEY}, and a server key refused. */
const PUBLISHABLE_KEY: ErrorCode[] = [...CHANNEL_KEY, "public_key_required"];
/** Reading a JSON body. */
const JSON_BODY: ErrorCode[] = ["unsupported_media_type", "payload_too_large", "bad_request", "validation_error"];
/** A channel's signature, when the channel requires one. */
const SIGNATURE: ErrorCode[] = ["signing_secret_unavailable", "signature_required", "invalid_signature", "signature_expired"];
/** A stream that stays open: past the caps on open streams (the service's `streamLimits`). */
const STREAMED: ErrorCode[] = ["too_many_streams"];
/** An admin JWT for the tenant of `X-Tenant-ID`. */
const ADMIN: ErrorCode[] = ["missing_tenant", "unauthorized", "forbidden", "jwks_unavailable", "rate_limited", "runtime_error"];

const conversationParam = (name: string, description: string): ParameterSpec => ({ name, in: "path", required: true, description });
const SESSION_ID = conversationParam("session_id", "The `conversation_id` a run answered (UUIDs compare case-insensitively).");
const CONVERSATION_ID = conversationParam("conversation_id", "The conversation's id.");
const CHAT_ID = conversationParam(
  "chat_id",
  "The AI SDK chat id the widget's chat was sent with (or a conversation id of the channel); a chat with no conversation yet answers 204.",
);
const CHANNEL_ID = conversationParam("channel_id", "The channel's id.");
const ORIGIN: ParameterSpec = {
  name: "Origin",
  in: "header",
  description:
    "Sent by browsers. With a publishable key it must be one of the channel's `allowed_origins` (403 `origin_not_allowed`); server keys are not checked.",
};
const SIGNATURE_HEADER: ParameterSpec = {
  name: "X-Service-Signature",
  in: "header",
  description:
    "`t=<unix seconds>,v1=<lowercase hex HMAC-SHA256 of \"<t>.<raw body>\">` keyed with the channel's signing secret, within 300 s of now; several `v1=` entries may be sent, any match passes. Required when the channel's `config.require_signature` is true, ignored otherwise.",
  // What a client sends; the server also reads the entries in any order, with spaces, and ignores other schemes.
  schema: z.string().regex(/^t=\d{1,15}(,v1=[0-9a-f]{64})+$/),
};

/** The routes that take an `Idempotency-Key` (execute, the webhook's `newMessage`): its format, then the key's own refusals. */
const IDEMPOTENCY: ErrorCode[] = ["invalid_idempotency_key", "idempotency_key_in_use", "idempotency_key_reused"];
const IDEMPOTENCY_KEY_HEADER: ParameterSpec = {
  name: "Idempotency-Key",
  in: "header",
  description:
    "Makes the request safe to retry (our extension, as Stripe's): a request sent again with the same key and the same JSON body within 24 hours answers the first request's answer (`Idempotent-Replayed: true`; a stream replays its events) without running the flow again. The same key with another body is 422 `idempotency_key_reused`; while the first request still runs, on any instance, 409 `idempotency_key_in_use` with `Retry-After`. Scoped to the channel. A request refused before its run (any other error) keeps no key, nor does a run stopped because its client left. 1 to 255 visible ASCII characters, e.g. a UUID (400 `invalid_idempotency_key` otherwise).",
  schema: z.string().regex(/^[\x21-\x7e]{1,255}$/),
};

/** The query parameters of a zod query schema, each described by `descriptions`. */
function queryParams(schema: z.ZodObject, descriptions: Record<string, string>): ParameterSpec[] {
  return Object.entries(schema.shape).map(([name, value]) => ({ name, in: "query", description: descriptions[name] ?? name, schema: value as z.ZodType }));
}

/** The request headers a browser may send, by tag: what each preflight allows. */
const ALLOWED_HEADERS: Record<Tag, string> = {
  api: "Authorization, Content-Type",
  streams: "Authorization, Content-Type",
  livechat: "Authorization, Content-Type",
  widget: "Authorization, Content-Type",
  webhook: "Content-Type, X-Service-Signature",
  admin: "Authorization, Content-Type, X-Tenant-ID",
  inbox: "Authorization, Content-Type, X-Tenant-ID, Last-Event-ID",
  bridge: "",
  service: "",
};

/** The CORS preflight of a path: no authentication, no body. */
function preflight(path: string, tag: Tag, operationId: string, plugin?: string, allowHeaders: string | string[] = ALLOWED_HEADERS[tag]): OperationSpec {
  return {
    method: "options",
    path,
    operationId: `preflight${operationId[0]?.toUpperCase()}${operationId.slice(1)}`,
    summary: "CORS preflight",
    description: "Answers every origin (the route itself checks it); `Access-Control-Allow-Credentials` is never set.",
    tag,
    ...(plugin ? { plugin } : {}),
    security: "none",
    responses: {
      204: {
        description: "The methods and headers allowed, for 600 s.",
        values: { "Access-Control-Allow-Headers": allowHeaders, "Access-Control-Max-Age": "600" },
      },
    },
    errors: [],
    preflight: true,
  };
}

const STREAM_HEADERS: HeaderName[] = ["Cache-Control-Stream", "X-Accel-Buffering", "X-Vercel-AI-UI-Message-Stream"];
/**
 * `Connection: keep-alive`, sent with every stream but hop-by-hop: HTTP/2 forbids it and
 * Cloudflare Workers drop it, so a client may not see it.
 */
const HOP_BY_HOP: HeaderName[] = ["Connection"];

const EXECUTE = "/public/v1/api/execute";
const CONVERSATION = "/public/v1/api/conversations/{session_id}";
const WIDGET_CHAT = "/public/widget/chat";
const CHANNEL = "/api/v1/channels/{channel_id}";
const INBOX = "/api/v1/livechat/conversations";
const INBOX_CONVERSATION = `${INBOX}/{conversation_id}`;

const ADMIN_PLUGIN = "adminApi()";
const INBOX_PLUGIN = "liveChatInbox()";
const BRIDGE_PLUGIN = "liveChatWebhookBridge()";
const WIDGET_PLUGIN = "widgetAsset() (@channelkit/widget)";

/** The answers of stopping a run (the API's and the widget's cancel). */
const CANCEL_RESPONSES: Record<number, SuccessSpec> = {
  200: { description: "The run is stored: `cancelled`, or how it ended if it ended first.", json: "RunCancelled" },
  202: { description: "The run was told to stop but is not stored within 10 s.", json: "RunCancelling" },
  204: { description: "No run of this conversation is in flight." },
};

/** The answers of following a run (the API's and the widget's stream). */
const RESUME_RESPONSES: Record<number, SuccessSpec> = {
  200: {
    description:
      "The stream of the conversation's run in flight, every event from its `data-run`, then live to its `finish` or `error` (the run whose stream started last, when several are in flight).",
    sse: "UIMessageStreamEvent",
    headers: STREAM_HEADERS,
    optionalHeaders: HOP_BY_HOP,
  },
  204: { description: "No run of a resumable channel is in flight for this conversation." },
};

/** Every route of the service and of channelkit's plugins. */
export const OPERATIONS: readonly OperationSpec[] = [
  // Idempotency-Key and X-Service-Signature only when the preflight asks for them: the contract's answer otherwise.
  preflight(EXECUTE, "api", "execute", undefined, [
    ALLOWED_HEADERS.api,
    `${ALLOWED_HEADERS.api}, Idempotency-Key`,
    `${ALLOWED_HEADERS.api}, X-Service-Signature`,
    `${ALLOWED_HEADERS.api}, Idempotency-Key, X-Service-Signature`,
  ]),
  {
    method: "post",
    path: EXECUTE,
    operationId: "execute",
    summary: "Run the channel's flow",
    description:
      "Runs the flow bound to the key's channel and answers the run as JSON, or streams it (the AI SDK UI message stream) when `stream` is true, or when absent and the channel's `default_stream` is. An error before the first byte is an HTTP error; after it, an `error` event ends the stream. Checks, first failure wins: the key, the channel type, its state, the environment, the origin, the media type, the size, the signature, the body, the conversation.",
    tag: "api",
    security: "channelKey",
    parameters: [ORIGIN, SIGNATURE_HEADER, IDEMPOTENCY_KEY_HEADER],
    body: { component: "ExecuteRequest", required: true },
    responses: {
      200: {
        description:
          "The run: as JSON (`stream` false), or as a stream of server-sent events. With an `Idempotency-Key` already answered, that answer again, the stream's events all at once.",
        json: "RunDocument",
        sse: "UIMessageStreamEvent",
        optionalHeaders: [...STREAM_HEADERS, ...HOP_BY_HOP, "Idempotent-Replayed"],
      },
    },
    errors: [
      ...CHANNEL_KEY,
      ...JSON_BODY,
      ...SIGNATURE,
      "conversation_not_found",
      "conversation_forbidden",
      ...IDEMPOTENCY,
      "flow_unavailable",
      "conversation_busy",
      ...STREAMED,
    ],
    counted: true,
  },
  preflight(`${CONVERSATION}/messages`, "api", "getHistory"),
  {
    method: "get",
    path: `${CONVERSATION}/messages`,
    operationId: "getHistory",
    summary: "Read a conversation's history",
    description:
      "`limit` keeps the most recent messages, returned oldest first; `token_budget` then keeps the most recent of those whose summed `token_count` fits. Never a signature. A conversation that does not exist, or is another channel's or tenant's, is a 404 in the `{ detail }` format.",
    tag: "api",
    security: "channelKey",
    parameters: [
      SESSION_ID,
      ...queryParams(historyQuerySchema, {
        limit: "The most recent messages to return, 1 to 200.",
        token_budget: "Keeps the most recent messages whose summed `token_count` fits; 0 for no budget.",
      }),
      ORIGIN,
    ],
    responses: { 200: { description: "The history.", json: "HistoryResponse" } },
    errors: [...CHANNEL_KEY, "validation_error"],
    detailNotFound: true,
    counted: true,
  },
  preflight(`${CONVERSATION}/events`, "livechat", "subscribeConversationEvents", undefined, "Authorization, Content-Type, Last-Event-ID"),
  {
    method: "get",
    path: `${CONVERSATION}/events`,
    operationId: "subscribeConversationEvents",
    summary: "Follow a conversation's live chat",
    description:
      "Server-sent events: the mode first, then each message of the live chat and each change of mode, until the client leaves (a comment every 15 s keeps it open). The checks of history.",
    tag: "livechat",
    security: "channelKey",
    parameters: [
      SESSION_ID,
      {
        name: "after",
        in: "query",
        description: "Replays the live-chat messages after this turn index (-1: all); without it (or `Last-Event-ID`) the stream starts from now.",
        schema: z.int().min(-1),
      },
      { name: "Last-Event-ID", in: "header", description: "What a reconnecting `EventSource` sends: as `after`.", schema: z.string().regex(/^-?\d+$/) },
      ORIGIN,
    ],
    responses: {
      200: {
        description: "The live chat as server-sent events.",
        sse: "ConversationEventStreamEvent",
        headers: ["Cache-Control-Stream", "X-Accel-Buffering"],
        optionalHeaders: HOP_BY_HOP,
      },
    },
    errors: [...CHANNEL_KEY, "validation_error", ...STREAMED],
    detailNotFound: true,
    counted: true,
  },
  preflight(`${CONVERSATION}/livechat/cancel`, "livechat", "cancelLiveChat", undefined, SIGNED_HEADERS),
  {
    method: "post",
    path: `${CONVERSATION}/livechat/cancel`,
    operationId: "cancelLiveChat",
    summary: "Leave the live chat",
    description:
      "The user leaves the queue or ends the live chat (`livechat_cancelled`); the provider is told, and the next message goes to the bot. The checks of history. No body: on a channel with `require_signature`, `X-Service-Signature` is computed over the empty body.",
    tag: "livechat",
    security: "channelKey",
    parameters: [SESSION_ID, ORIGIN, SIGNATURE_HEADER],
    responses: { 200: { description: "The conversation's live chat as it is now.", json: "LiveChatState" } },
    errors: [...CHANNEL_KEY, ...SIGNATURE, "livechat_conflict"],
    detailNotFound: true,
    counted: true,
  },
  preflight(`${CONVERSATION}/stream`, "streams", "resumeConversationStream"),
  {
    method: "get",
    path: `${CONVERSATION}/stream`,
    operationId: "resumeConversationStream",
    summary: "Follow the run in flight",
    description: "The checks of history, its 404 included.",
    tag: "streams",
    security: "channelKey",
    parameters: [SESSION_ID, ORIGIN],
    responses: RESUME_RESPONSES,
    errors: [...CHANNEL_KEY, ...STREAMED],
    detailNotFound: true,
    counted: true,
  },
  preflight(`${CONVERSATION}/cancel`, "streams", "cancelConversationRun", undefined, SIGNED_HEADERS),
  {
    method: "post",
    path: `${CONVERSATION}/cancel`,
    operationId: "cancelConversationRun",
    summary: "Stop the run in flight",
    description:
      "Stops the conversation's run on whichever instance runs it; its streams end with `finish` and it is stored `cancelled`. The checks of history. No body: on a channel with `require_signature`, `X-Service-Signature` is computed over the empty body.",
    tag: "streams",
    security: "channelKey",
    parameters: [SESSION_ID, ORIGIN, SIGNATURE_HEADER],
    responses: CANCEL_RESPONSES,
    errors: [...CHANNEL_KEY, ...SIGNATURE],
    detailNotFound: true,
    counted: true,
  },
  preflight("/public/widget/config", "widget", "getWidgetConfig"),
  {
    method: "get",
    path: "/public/widget/config",
    operationId: "getWidgetConfig",
    summary: "Read the widget's configuration",
    description: "In the requested locale when the channel has it, else the best match of `Accept-Language`, else the channel's first language. Never cached.",
    tag: "widget",
    security: "publishableKey",
    parameters: [
      ...queryParams(widgetConfigQuerySchema, { locale: "A language of the channel, `xx_XX`." }),
      { name: "Accept-Language", in: "header", description: "The browser's languages, when `locale` is absent or not the channel's." },
      ORIGIN,
    ],
    responses: { 200: { description: "The widget's configuration.", json: "WidgetConfig", headers: ["Cache-Control-No-Store"] } },
    errors: [...PUBLISHABLE_KEY, "validation_error"],
    counted: true,
  },
  preflight(WIDGET_CHAT, "widget", "widgetChat", undefined, SIGNED_HEADERS),
  {
    method: "post",
    path: WIDGET_CHAT,
    operationId: "widgetChat",
    summary: "Chat through the widget",
    description: "Runs the flow on the user's message and always streams, with execute's protocol and checks (in its order), publishable keys only.",
    tag: "widget",
    security: "publishableKey",
    parameters: [ORIGIN, SIGNATURE_HEADER],
    body: { component: "WidgetChatRequest", required: true },
    responses: {
      200: { description: "The run as a stream of server-sent events.", sse: "UIMessageStreamEvent", headers: STREAM_HEADERS, optionalHeaders: HOP_BY_HOP },
    },
    errors: [
      ...PUBLISHABLE_KEY,
      ...JSON_BODY,
      ...SIGNATURE,
      "conversation_not_found",
      "conversation_forbidden",
      "flow_unavailable",
      "conversation_busy",
      ...STREAMED,
    ],
    counted: true,
  },
  preflight(`${WIDGET_CHAT}/{chat_id}/stream`, "widget", "resumeWidgetChatStream"),
  {
    method: "get",
    path: `${WIDGET_CHAT}/{chat_id}/stream`,
    operationId: "resumeWidgetChatStream",
    summary: "Follow a widget chat's run in flight",
    description: "Where `useChat({ resume: true })` reconnects: the conversation stream route for a chat id, publishable keys only.",
    tag: "widget",
    security: "publishableKey",
    parameters: [CHAT_ID, ORIGIN],
    responses: RESUME_RESPONSES,
    errors: [...PUBLISHABLE_KEY, ...STREAMED],
    detailNotFound: true,
    counted: true,
  },
  preflight(`${WIDGET_CHAT}/{chat_id}/cancel`, "widget", "cancelWidgetChatRun", undefined, SIGNED_HEADERS),
  {
    method: "post",
    path: `${WIDGET_CHAT}/{chat_id}/cancel`,
    operationId: "cancelWidgetChatRun",
    summary: "Stop a widget chat's run in flight",
    description:
      "The conversation cancel route for a chat id, publishable keys only. No body: on a channel with `require_signature`, `X-Service-Signature` is computed over the empty body.",
    tag: "widget",
    security: "publishableKey",
    parameters: [CHAT_ID, ORIGIN, SIGNATURE_HEADER],
    responses: CANCEL_RESPONSES,
    errors: [...PUBLISHABLE_KEY, ...SIGNATURE],
    detailNotFound: true,
    counted: true,
  },
  ...(["startConversation", "newMessage"] as const).flatMap((route): OperationSpec[] => {
    const path = `/channels/webhook/{client_id}/${route}`;
    const start = route === "startConversation";
    return [
      preflight(
        path,
        "webhook",
        start ? "startWebhookConversation" : "sendWebhookMessage",
        undefined,
        start ? ALLOWED_HEADERS.webhook : `${ALLOWED_HEADERS.webhook}, Idempotency-Key`,
      ),
      {
        method: "post",
        path,
        operationId: start ? "startWebhookConversation" : "sendWebhookMessage",
        summary: start ? "Start a conversation" : "Send a message",
        description: start
          ? "Opens a conversation in one of the channel's languages and runs the flow's greeting. Checks: the channel, the media type and size, the signature when required, the body."
          : "Runs the flow on the user's input in a conversation of this channel; runs of one conversation take turns.",
        tag: "webhook",
        security: "none",
        parameters: [
          { name: "client_id", in: "path", required: true, description: "The webhook channel's `client_id` (the channel view shows it)." },
          SIGNATURE_HEADER,
          ...(start ? [] : [IDEMPOTENCY_KEY_HEADER]),
        ],
        body: { component: start ? "StartConversationRequest" : "NewMessageRequest", required: true },
        responses: {
          200: start
            ? { description: "The conversation record and the events of the greeting.", json: "StartConversationResponse" }
            : {
                description: "The events the message produced (with an `Idempotency-Key` already answered, that answer again).",
                json: "NewMessageResponse",
                optionalHeaders: ["Idempotent-Replayed"],
              },
        },
        errors: [
          "channel_not_found",
          "channel_archived",
          "channel_inactive",
          "rate_limited",
          "runtime_error",
          ...JSON_BODY,
          ...SIGNATURE,
          ...(start ? [] : (["conversation_not_found", ...IDEMPOTENCY, "conversation_busy"] as const)),
          "flow_unavailable",
        ],
        counted: true,
      },
    ];
  }),
  preflight(CHANNEL, "admin", "getChannel", ADMIN_PLUGIN),
  {
    method: "get",
    path: CHANNEL,
    operationId: "getChannel",
    summary: "Read a channel",
    description: "Archived channels included: reading is not managing. Another tenant's channel is not found.",
    tag: "admin",
    plugin: ADMIN_PLUGIN,
    security: "admin",
    parameters: [CHANNEL_ID],
    responses: { 200: { description: "The channel.", json: "GetChannelResponse" } },
    errors: [...ADMIN, "channel_not_found"],
    counted: true,
  },
  {
    method: "patch",
    path: CHANNEL,
    operationId: "updateChannel",
    summary: "Change a channel's settings",
    description: "Only the fields sent change; unknown fields are a 422. Recorded in the audit trail, refusals included.",
    tag: "admin",
    plugin: ADMIN_PLUGIN,
    security: "admin",
    parameters: [CHANNEL_ID],
    body: { component: "UpdateChannelRequest", required: true },
    responses: { 200: { description: "The channel as it is now, and its signing secret when signatures were just turned on.", json: "UpdateChannelResponse" } },
    errors: [...ADMIN, ...JSON_BODY, "channel_not_found", "channel_archived"],
    counted: true,
  },
  preflight(`${CHANNEL}/rotate-key`, "admin", "rotateChannelKey", ADMIN_PLUGIN),
  {
    method: "post",
    path: `${CHANNEL}/rotate-key`,
    operationId: "rotateChannelKey",
    summary: "Rotate a channel's key",
    description: "Revokes the key and creates one with the same prefix and environment. No body.",
    tag: "admin",
    plugin: ADMIN_PLUGIN,
    security: "admin",
    parameters: [CHANNEL_ID],
    responses: { 200: { description: "The new key, shown once.", json: "RotateKeyResponse" } },
    errors: [...ADMIN, "channel_not_found", "channel_archived"],
    counted: true,
  },
  preflight(`${CHANNEL}/rotate-signing-secret`, "admin", "rotateChannelSigningSecret", ADMIN_PLUGIN),
  {
    method: "post",
    path: `${CHANNEL}/rotate-signing-secret`,
    operationId: "rotateChannelSigningSecret",
    summary: "Rotate a channel's signing secret",
    description: "The previous secret is invalidated at once. No body.",
    tag: "admin",
    plugin: ADMIN_PLUGIN,
    security: "admin",
    parameters: [CHANNEL_ID],
    responses: { 200: { description: "The new secret, shown once.", json: "RotateSigningSecretResponse" } },
    errors: [...ADMIN, "channel_not_found", "channel_archived"],
    counted: true,
  },
  preflight("/api/v1/audit", "admin", "listAuditEvents", ADMIN_PLUGIN),
  {
    method: "get",
    path: "/api/v1/audit",
    operationId: "listAuditEvents",
    summary: "Read the audit trail",
    description: "The tenant's admin operations, newest first, refused ones included. Any other query parameter is a 422.",
    tag: "admin",
    plugin: ADMIN_PLUGIN,
    security: "admin",
    parameters: queryParams(auditRouteQuerySchema, {
      channel_id: "Only this channel's events.",
      limit: "Events per page, 1 to 200.",
      cursor: "The `next_cursor` of the previous page.",
    }),
    responses: { 200: { description: "A page of the trail.", json: "AuditPage" } },
    errors: [...ADMIN, "validation_error"],
    counted: true,
  },
  preflight(INBOX, "inbox", "listLiveChats", INBOX_PLUGIN),
  {
    method: "get",
    path: INBOX,
    operationId: "listLiveChats",
    summary: "List the live chats",
    description: "The tenant's waiting and active live chats, longest waiting first. Any other query parameter is a 422.",
    tag: "inbox",
    plugin: INBOX_PLUGIN,
    security: "admin",
    parameters: queryParams(inboxListQuerySchema, { mode: "Which live chats: `waiting`, `active` or `all`.", limit: "At most this many, 1 to 200." }),
    responses: { 200: { description: "The live chats.", json: "InboxList" } },
    errors: [...ADMIN, "validation_error"],
    counted: true,
  },
  preflight(INBOX_CONVERSATION, "inbox", "getLiveChat", INBOX_PLUGIN),
  {
    method: "get",
    path: INBOX_CONVERSATION,
    operationId: "getLiveChat",
    summary: "Read a live chat",
    description: "One conversation of the tenant, with its recent messages.",
    tag: "inbox",
    plugin: INBOX_PLUGIN,
    security: "admin",
    parameters: [CONVERSATION_ID, ...queryParams(inboxConversationQuerySchema, { limit: "The most recent messages to return, 1 to 200." })],
    responses: { 200: { description: "The conversation and its recent messages.", json: "InboxConversationResponse" } },
    errors: [...ADMIN, "validation_error", "conversation_not_found"],
    counted: true,
  },
  preflight(`${INBOX_CONVERSATION}/accept`, "inbox", "acceptLiveChat", INBOX_PLUGIN),
  {
    method: "post",
    path: `${INBOX_CONVERSATION}/accept`,
    operationId: "acceptLiveChat",
    summary: "Accept a waiting live chat",
    description: "The agent takes the conversation (`livechat_active`). The body may be left out.",
    tag: "inbox",
    plugin: INBOX_PLUGIN,
    security: "admin",
    parameters: [CONVERSATION_ID],
    body: { component: "AcceptRequest", required: false },
    responses: { 200: { description: "The conversation as it is now.", json: "InboxConversationOnly" } },
    errors: [...ADMIN, ...JSON_BODY, "conversation_not_found", "livechat_conflict"],
    counted: true,
  },
  preflight(`${INBOX_CONVERSATION}/messages`, "inbox", "sendLiveChatMessage", INBOX_PLUGIN),
  {
    method: "post",
    path: `${INBOX_CONVERSATION}/messages`,
    operationId: "sendLiveChatMessage",
    summary: "Write to the user",
    description: "Stored with the next turn index while the live chat waits or is active; a `livechat_message_id` already stored is not stored twice.",
    tag: "inbox",
    plugin: INBOX_PLUGIN,
    security: "admin",
    parameters: [CONVERSATION_ID],
    body: { component: "AgentMessageRequest", required: true },
    responses: { 200: { description: "The message as stored.", json: "AgentMessageResponse" } },
    errors: [...ADMIN, ...JSON_BODY, "conversation_not_found", "livechat_conflict"],
    counted: true,
  },
  preflight(`${INBOX_CONVERSATION}/close`, "inbox", "closeLiveChat", INBOX_PLUGIN),
  {
    method: "post",
    path: `${INBOX_CONVERSATION}/close`,
    operationId: "closeLiveChat",
    summary: "Close a live chat",
    description: "The agent ends the live chat (`livechat_closed`); the bot takes the next message. No body.",
    tag: "inbox",
    plugin: INBOX_PLUGIN,
    security: "admin",
    parameters: [CONVERSATION_ID],
    responses: { 200: { description: "The conversation as it is now.", json: "InboxConversationOnly" } },
    errors: [...ADMIN, "conversation_not_found", "livechat_conflict"],
    counted: true,
  },
  preflight("/api/v1/livechat/feed", "inbox", "liveChatFeed", INBOX_PLUGIN),
  {
    method: "get",
    path: "/api/v1/livechat/feed",
    operationId: "liveChatFeed",
    summary: "Follow the tenant's live chats",
    description: "Server-sent events from every instance, until the client leaves (a comment every 15 s keeps it open).",
    tag: "inbox",
    plugin: INBOX_PLUGIN,
    security: "admin",
    responses: {
      200: { description: "The feed.", sse: "InboxFeedStreamEvent", headers: ["Cache-Control-Stream", "X-Accel-Buffering"], optionalHeaders: HOP_BY_HOP },
    },
    errors: [...ADMIN, ...STREAMED],
    counted: true,
  },
  {
    method: "post",
    path: "/api/v1/livechat/bridge/events",
    operationId: "postBridgeEvent",
    summary: "Report the human side's event",
    description:
      "What the help desk's receiver sends back: an agent joined, wrote, closed, or nobody is available. The signature is checked on the raw body first.",
    tag: "bridge",
    plugin: BRIDGE_PLUGIN,
    security: "bridge",
    body: { component: "BridgeEvent", required: true },
    responses: { 200: { description: "The conversation's live chat as it is now, or `{ message }` for a message.", json: "BridgeEventResponse" } },
    errors: [
      "signature_required",
      "invalid_signature",
      "signature_expired",
      ...JSON_BODY,
      "conversation_not_found",
      "livechat_conflict",
      "rate_limited",
      "runtime_error",
    ],
    // A wrong signature counts as a failed authentication: its answer carries the RateLimit fields.
    counted: true,
  },
  {
    method: "get",
    path: OPENAPI_PATH,
    operationId: "getOpenApiDocument",
    summary: "This document",
    description: "The OpenAPI document of the routes this service mounts. Turned off with `createChannelService({ openapi: false })`.",
    tag: "service",
    security: "none",
    responses: {
      200: {
        description: "The OpenAPI 3.1 document.",
        other: {
          mediaType: "application/json",
          description: "An OpenAPI 3.1 document.",
          schema: {
            type: "object",
            required: ["openapi", "info", "paths"],
            properties: { openapi: { type: "string", pattern: "^3\\.1\\.\\d+$" }, info: { type: "object" }, paths: { type: "object" } },
          },
        },
        headers: ["Cache-Control-Public"],
      },
    },
    errors: ["runtime_error"],
  },
  ...(["get", "head"] as const).map(
    (method): OperationSpec => ({
      method,
      path: "/public/widget/widget.js",
      operationId: method === "get" ? "getWidgetScript" : "headWidgetScript",
      summary: "The widget's script",
      description: "Cached publicly for 5 minutes, revalidated by its ETag.",
      tag: "service",
      plugin: WIDGET_PLUGIN,
      security: "none",
      parameters: [{ name: "If-None-Match", in: "header", description: "The ETag a cache holds: a match answers 304." }],
      responses: {
        200: {
          description: method === "get" ? "The script." : "The script's headers.",
          ...(method === "get" ? { other: { mediaType: "text/javascript", description: "The widget's loader." } } : {}),
          headers: ["Cache-Control-Public", "ETag"],
        },
        304: { description: "The cached script is current.", headers: ["Cache-Control-Public", "ETag"] },
      },
      errors: ["runtime_error"],
    }),
  ),
];
