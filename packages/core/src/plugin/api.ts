/**
 * The plugin API: everything a channel or a feature plugin may use, exported from
 * `@channelkit/core`. channelkit's own channels (API, webhook, widget) and features (the
 * admin routes, the live-chat inbox and bridge) are built on this and nothing else: a test
 * keeps their folders from importing anything of core that is not here (plugin/boundaries.test.ts).
 */

// The shape of a plugin, its routes, channel types, hooks and storage.
export { definePlugin, type ChannelPlugin, type ErrorCodeDefinition } from "./plugin.js";
export {
  defineRoute,
  type AnyRoute,
  type PathParamNames,
  type PathParams,
  type RouteAnswer,
  type RouteCall,
  type RouteCors,
  type RouteDefinition,
  type RouteMethod,
} from "./route.js";
export { channelEndpoint, defineChannelType, type ChannelTypeDefinition } from "./channel-type.js";
export type * from "./hooks.js";
export type * from "./storage.js";
export type { OperationDoc, ParameterSpec, SuccessSpec, HeaderName, Security, Tag } from "../openapi/spec.js";
export * as routeDocs from "../openapi/common.js";

// What a route receives.
export type * from "../storage/types.js";
export type { LiveChatConversation, LiveChatProvider } from "../livechat/provider.js";
export type { TenantSignal } from "../livechat/live-chat.js";
export type {
  AdminAccess,
  LiveChatService,
  Logger,
  OpenStreamCaps,
  PluginServices,
  RateLimits,
  RegisteredFlow,
  ReleaseHold,
  ResumableStreams,
  RunFlowInput,
  Runs,
  ServiceContext,
} from "../context.js";
export { fromResponse, toResponse, type IncomingRequest, type Reply, type ReplyChunk, type ReplyStream, type RequestHeaders } from "../http/reply.js";
export type { RouteParams, RouteRequest } from "../plugins.js";

// Answering: JSON, errors in the contract's envelope, server-sent events.
export { ServiceError, isServiceError, type AnyErrorCode, type ErrorCode } from "../http/errors.js";
export { json, jsonResponse } from "../http/respond.js";
export { validate, integerParam } from "../http/validate.js";
export { readRawBody, parseJson, requireJsonContentType } from "../http/body.js";
export { SSE_HEADERS, sseEvent, PushStream } from "../http/sse.js";

// Who sends the request: a channel's key and signature, an admin's token.
export { authenticateApiKey, authenticateRequest, bearerToken, type ApiKeyOptions } from "../auth/authenticate.js";
export { checkChannelSignature, checkSignedRequest } from "../auth/channel-signature.js";
export { adminAuthenticator, type AdminAuthOptions, type AdminCredentials } from "../auth/admin-token.js";
export { adminRequest, type AdminAuthenticate, type AdminRequest } from "../auth/admin-request.js";
export { sha256Hex, timingSafeEqual } from "../auth/encoding.js";
export { signRequestBody, verifySignature } from "../auth/signature.js";
export type { SecretBox } from "../auth/secret-box.js";

export type { AdminCaller, AuditTarget, ChannelAdmin } from "../admin/operations.js";
export type { AuditOperation } from "../admin/audit.js";

// Running the channel's flow and answering its run.
export { channelFlow, channelFlowAfter } from "../channels/flow.js";
export { userText, MAX_PAYLOAD_LENGTH } from "../channels/user-text.js";
export { runToEnd, type StartRunInput, type StartedRun } from "../runs/start.js";
export { runDocument, type FlowIdentity } from "../runs/json.js";
export { uiMessageStream, UI_STREAM_HEADERS, type FinishMetadata, type UIStreamEvent } from "../runs/ui-stream.js";
export type { RunOutcome } from "../runs/outcome.js";
export type { FlowEventPart, RunPart, RunSteps, TextPart } from "../runs/driver.js";
export { answerOnce, idempotencyKeyOf, type IdempotentScope, type KeptAnswer } from "../idempotency/idempotency.js";
export { externalConversationId } from "../runs/external-key.js";

// The routes of resumable streams, for a channel that offers them on paths of its own.
export { cancelChatRun, cancelConversationRun, resumeChatStream, resumeConversationStream } from "../streams/routes.js";

// Conversations and their messages as the contract shows them.
export { conversationOrDetail, findOwnConversation, isDetailReply } from "../conversations/own.js";
export { canonicalId } from "../storage/records.js";
export { channelSettings, type SettingsContext } from "../channels/settings.js";
// The contract's schemas, for routes that take or answer the same fields.
export { conversationIdSchema, MAX_METADATA_LENGTH, metadataSchema } from "../conversations/schemas.js";
export {
  agentMessageResponseSchema,
  agentMessageSchema,
  conversationModeSchema,
  liveChatSender,
  liveChatStateResponseSchema,
  liveChatViewSchema,
  livechatConversationIdSchema,
} from "../livechat/schemas.js";
export { auditRouteQuerySchema, patchChannelBodySchema, type UpdateChannelInput } from "../admin/schemas.js";
export { eraseEndUserBodySchema, exportConversationsQuerySchema, listConversationsQuerySchema } from "../admin/conversations.js";
export { messageView, messageViewSchema, type MessageView } from "../conversations/message-view.js";
export { liveChatView } from "../livechat/view.js";
export { fitTokenBudget } from "../conversations/window.js";
