/**
 * `@channelkit/core/adapter`: the fast path of `service.dispatch`, for runtime adapters such
 * as `@channelkit/node`. `dispatch` reads an {@link IncomingRequest} (a Web `Request` is one)
 * and answers a {@link Reply} the adapter writes itself, without building a Web `Response`.
 * Everything else uses `service.handler(request: Request): Promise<Response>`.
 */
export {
  toResponse,
  fromResponse,
  isReplyStream,
  type Reply,
  type ReplyStream,
  type ReplyChunk,
  type IncomingRequest,
  type RequestHeaders,
} from "./http/reply.js";
/** The contract's error envelope of a code, for what an adapter answers itself (a request Node's parser refused). */
export { errorEnvelope } from "./http/respond.js";
export { ERROR_CODES, type ErrorCode } from "./http/errors.js";
/** The lazy abort a run uses; an adapter that learns of a disconnect without a signal reuses it. */
export { RunAbort } from "./runs/abort.js";
/** Refuses what is not a channel service (a forgotten `await createChannelService(...)`) with a TypeError saying what to pass. */
export { assertChannelService } from "./assert-service.js";
