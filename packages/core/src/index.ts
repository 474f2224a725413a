/**
 * `@channelkit/core`: what a host app, a flow author and a plugin author use. Adapter
 * plumbing (the `Reply` that `service.dispatch` answers) is on `@channelkit/core/adapter`,
 * the demo flows on `@channelkit/core/demo`.
 */

// Host app: the service, its options, its administration.
export {
  createChannelService,
  type ChannelService,
  type ChannelServiceOptions,
  type ConnectionInfo,
  type RateLimitOptions,
  type ServiceRoute,
} from "./service.js";
// Rate limits: their rules, where they count (a store of your own, e.g. on Redis), and the
// limiter a plugin's route counts its requests with.
export {
  channelRateLimitsWireSchema,
  serviceRateLimitsWireSchema,
  DEFAULT_RATE_LIMITS,
  type ChannelRateLimits,
  type RateLimitRule,
  type RateLimitSetting,
  type ServiceRateLimits,
} from "./ratelimit/rules.js";
export {
  flexibleRateLimitStore,
  memoryRateLimitStore,
  type FlexibleLimiter,
  type FlexibleLimiterOptions,
  type RateLimitCount,
  type RateLimitStore,
} from "./ratelimit/store.js";
export type { RateLimiter } from "./ratelimit/limiter.js";
export { DEFAULT_STREAM_LIMITS, type OpenStreams, type StreamLimits } from "./ratelimit/open-streams.js";
export type { TrustProxy } from "./ratelimit/address.js";
export type { ChannelAdmin, CreatedChannel, TenantView } from "./admin/operations.js";
export type { ResealedSecrets } from "./admin/reseal.js";
export type { RetentionSweepResult } from "./conversations/retention.js";
export type { RetentionOptions } from "./conversations/retention-schedule.js";
export type { ChannelView } from "./admin/channel-view.js";
export type { AuditQueryInput, CreateChannelInput, UpdateChannelInput } from "./admin/schemas.js";
export type { AuditEvent, AuditOperation, AuditPage } from "./admin/audit.js";
// The admin routes (rotate-key, rotate-signing-secret, channel settings, audit) behind an admin JWT.
export { adminApi } from "./admin/routes/plugin.js";
export type { AdminAuthOptions } from "./auth/admin-token.js";
export type { WidgetSettings, WidgetStrings } from "./channels/widget/settings.js";
// Live chat: the built-in agent inbox, the provider interface for your own, the feed between instances.
export { liveChatInbox } from "./livechat/inbox/plugin.js";
export { liveChatWebhookBridge, type LiveChatWebhookBridgeOptions } from "./livechat/bridge/plugin.js";
export type { RetryPolicy } from "./livechat/bridge/deliveries.js";
export type { LiveChatProvider, LiveChatConversation, LiveChatHandover, LiveChatUserMessage } from "./livechat/provider.js";
export type { LiveChat, LiveChatState, TenantSignal } from "./livechat/live-chat.js";
export type { AgentMessageInput } from "./livechat/schemas.js";
export type { MessageView } from "./conversations/message-view.js";
// Storage implementers: the feed of one process, and the limit every feed keeps.
export { inProcessFeed, checkFeedMessage, MAX_FEED_MESSAGE_BYTES } from "./livechat/feed.js";
export type { TokenEstimator } from "./conversations/tokens.js";
// Clients of a channel: signing a request body, reading the SSE stream.
export { signRequestBody } from "./auth/signature.js";
export type { FinishMetadata, UIStreamEvent } from "./runs/ui-stream.js";
// The OpenAPI 3.1 document of the routes (docs/openapi.json; served at GET /public/v1/openapi.json).
export { openApiDocument, type OpenApiDocument, type OpenApiDocumentOptions } from "./openapi/document.js";
export { OPENAPI_PATH, openApiPlugin } from "./openapi/route.js";
export { jsonLogger, type JsonLoggerOptions } from "./logging/json-logger.js";
export type { AccessLogEntry } from "./telemetry/request.js";
// The meter of a package that measures (the storages' group commit): null without an SDK.
export { registeredMeter } from "./telemetry/telemetry.js";
export { HEALTHZ_PATH, healthPlugin, READYZ_PATH, READY_STORAGE_TIMEOUT_MS, type Readiness, type ReadinessSources, readiness } from "./health/route.js";

// Flow authors.
export { defineFlow, type Flow, type FlowContext, type FlowHistoryMessage, type FlowTrigger } from "./flows/define.js";
export {
  step,
  text,
  message,
  pause,
  handover,
  setState,
  suggestions,
  sources,
  expectResponse,
  setVariables,
  type FlowEvent,
  type ReplyOptionsEvent,
  type VariablesEvent,
  type StepEvent,
  type TextDeltaEvent,
  type MessageEvent,
  type PauseEvent,
  type HandoverEvent,
  type StateEvent,
} from "./flows/events.js";

// Plugin authors: the plugin API (docs/plugins.md), and the built-in channels, to leave one
// out or put another in its place (`createChannelService({ channels })`).
export * from "./plugin/api.js";
// A plugin's channels: their full settings, secrets opened; the options of key authentication (the channel types a route serves).
export { channelSettings, type SettingsContext } from "./channels/settings.js";
export type { ApiKeyOptions } from "./auth/authenticate.js";
export { apiChannel } from "./channels/api/plugin.js";
export { webhookChannel } from "./channels/webhook/plugin.js";
export { widgetChannel } from "./channels/widget/plugin.js";
// Storage implementers: the feed topic on which a store announces a turn passed (`Storage.announcesTurns`).
export { TURN_PASSED_TOPIC } from "./runs/lifecycle.js";

// Storage implementers (and tools that seed or read a store): what is stored, and how keys
// and signing secrets are stored.
export type * from "./storage/types.js";
// In-memory storage, for unit tests of your own flows.
export { memoryStorage } from "./storage/memory.js";
export { generateApiKey, hashApiKey } from "./auth/api-keys.js";
export {
  ABANDONED_RUN_ERROR,
  END_USER_METADATA_FIELDS,
  LIVE_MODES,
  metadataNamesEndUser,
  newConversationRecord,
  type StoredChannel,
  storedChannelPatch,
  storedMessage,
} from "./storage/records.js";
export { TurnPassedOver } from "./storage/turn-passed-over.js";
export { createSecretBox } from "./auth/secret-box.js";
