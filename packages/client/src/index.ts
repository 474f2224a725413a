/**
 * `@channelkit/client`: a typed client of a channelkit service's HTTP routes, on Web `fetch`
 * and Web Crypto only (Node 20+, browsers, Bun, Deno, Workers).
 *
 * @packageDocumentation
 */
export {
  type AdminApi,
  type AdminOptions,
  type AuditOptions,
  type CallOptions,
  type ChannelkitClient,
  type ClientOptions,
  createClient,
  type HistoryOptions,
  type RunCallOptions,
  type LiveChatApi,
  type SubscribeOptions,
  type WebhookApi,
  type WebhookOptions,
  type WidgetApi,
  type WidgetConfigOptions,
} from "./client.js";
export { ChannelkitError, type ChannelkitErrorCode, type ChannelkitErrorInit, ERROR_CODES, isChannelkitError } from "./errors.js";
export { LiveChatSubscription } from "./livechat.js";
export type { RetryOptions } from "./retry.js";
export { signatureHeader } from "./sign.js";
export {
  ChannelkitStream,
  type DataRunChunk,
  type ErrorChunk,
  type FinishChunk,
  type FinishMetadata,
  type OtherUIMessageChunk,
  type TextDeltaChunk,
  type TextEndChunk,
  type TextStartChunk,
  type UIMessageChunk,
} from "./stream.js";
export type * from "./types.js";
