export { createChannelService, type ChannelService, type ChannelServiceOptions, type ServiceRoute } from "./service.js";
export type { Logger, ServiceContext, RegisteredFlow } from "./context.js";
export type { ChannelPlugin } from "./plugins.js";
export type { Route, RouteParams } from "./http/router.js";
export { json, errorReply } from "./http/respond.js";
export { toResponse, fromResponse, isReplyStream, type Reply, type ReplyStream, type ReplyChunk, type IncomingRequest, type RequestHeaders } from "./http/reply.js";
export { authenticateApiKey, bearerToken } from "./auth/authenticate.js";
export { startRun, type StartRunInput, type StartedRun } from "./runs/start.js";
export type { RunSteps, TextPart } from "./runs/driver.js";
export type { RunOutcome } from "./runs/outcome.js";
export { RunAbort } from "./runs/abort.js";

export { defineFlow, type Flow, type FlowContext, type FlowHistoryMessage } from "./flows/define.js";
export {
  step,
  text,
  message,
  pause,
  handover,
  setState,
  type FlowEvent,
  type StepEvent,
  type TextDeltaEvent,
  type MessageEvent,
  type PauseEvent,
  type HandoverEvent,
  type StateEvent,
} from "./flows/events.js";
export { demoFlows, echoFlow, failFlow, askFlow, handoverFlow, slowFlow } from "./flows/demo.js";

export { ServiceError, isServiceError, statusOf, ERROR_CODES, type ErrorCode } from "./http/errors.js";
export { signRequestBody, verifySignature, SIGNATURE_TOLERANCE_SECONDS } from "./auth/signature.js";
export { generateApiKey, hashApiKey, apiKeyHint, parseApiKey, KEY_PREFIXES, type KeyPrefix } from "./auth/api-keys.js";
export { createSecretBox, type SecretBox } from "./auth/secret-box.js";
export { estimateTokens, type TokenEstimator } from "./conversations/tokens.js";

export type { ChannelAdmin, CreatedChannel } from "./admin/operations.js";
export type { ChannelView } from "./admin/channel-view.js";
export type { CreateChannelInput, UpdateChannelInput } from "./admin/schemas.js";
export type { UIStreamEvent } from "./runs/ui-stream.js";

export type * from "./storage/types.js";
export { memoryStorage } from "./storage/memory.js";
