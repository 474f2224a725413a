import {
  answerOnce,
  authenticateRequest,
  canonicalId,
  channelFlow,
  channelFlowAfter,
  type ChannelRecord,
  checkChannelSignature,
  type ConversationRecord,
  findOwnConversation,
  idempotencyKeyOf,
  type IncomingRequest,
  isServiceError,
  json,
  type KeptAnswer,
  parseJson,
  readRawBody,
  type RegisteredFlow,
  type Reply,
  requireJsonContentType,
  runDocument,
  runToEnd,
  type ServiceContext,
  sha256Hex,
  UI_STREAM_HEADERS,
  uiMessageStream,
  validate,
} from "../../plugin/api.js";
import type { z } from "zod";
import { executeRequestSchema } from "./schemas.js";

type ExecuteRequest = z.infer<typeof executeRequestSchema>;

/**
 * `POST /public/v1/api/execute`: runs the channel's flow, answering JSON or the UI message
 * stream. With an `Idempotency-Key`, once per key: a retry gets the first answer (docs/api.md).
 */
export async function execute(request: IncomingRequest, ctx: ServiceContext): Promise<Reply> {
  const found = await authenticateRequest(request, ctx);
  const { channel } = found;
  requireJsonContentType(request);
  const body = await readRawBody(request, ctx.maxBodyBytes);
  if (channel.requireSignature) await checkChannelSignature(request, channel, body, ctx);
  const requested = idempotencyKeyOf(request);
  // No await on the usual path (a server key, or no key): execute is the hot path.
  const key = requested !== null && found.key.prefix === "svc_pub_" ? await visitorKey(request, ctx, requested) : requested;
  const parsed = parseJson(body);
  const input = validate(executeRequestSchema, parsed);
  // A streamed answer holds its connection for the whole run: it counts against the caps on
  // open streams, refused before the run starts.
  if (input.stream ?? channel.defaultStream) {
    return await ctx.openStreams.forKey(request, found, () =>
      key === null ? runOnConversation(request, ctx, channel, input) : runOnce(request, ctx, channel, input, key, parsed),
    );
  }
  // Without a key, nothing more than today: no closure, no statement.
  // Awaited: an async function that returns a promise adopts it a turn of the microtasks later.
  if (key === null) return await runOnConversation(request, ctx, channel, input);
  return await runOnce(request, ctx, channel, input, key, parsed);
}

/** {@link run} once per `Idempotency-Key`: a retry gets the first answer. */
async function runOnce(
  request: IncomingRequest,
  ctx: ServiceContext,
  channel: ChannelRecord,
  input: ExecuteRequest,
  key: string,
  parsed: unknown,
): Promise<Reply> {
  const existing = input.conversation_id ? await findOwnConversation(ctx.storage, channel, input.conversation_id) : null;
  const registered = channelFlow(ctx, channel);
  return answerOnce(ctx, request, { channelId: channel.id, operation: "execute", key, body: parsed }, (kept) =>
    run(request, ctx, channel, registered, existing, input, kept),
  );
}

/**
 * {@link run} on the conversation the request names, not read before: the run takes its
 * ticket only on one of the channel's conversations (`ctx.runs.start`'s 404), and only then is the
 * conversation read, to tell another channel's (403 `conversation_forbidden`) from an
 * unknown one (docs/benchmarks.md, "The conversation checked by the run's ticket").
 */
async function runOnConversation(request: IncomingRequest, ctx: ServiceContext, channel: ChannelRecord, input: ExecuteRequest): Promise<Reply> {
  const named = input.conversation_id;
  if (!named) return await run(request, ctx, channel, channelFlow(ctx, channel), null, input, null);
  const registered = await channelFlowAfter(ctx, channel, () => findOwnConversation(ctx.storage, channel, named));
  try {
    return await run(request, ctx, channel, registered, { id: canonicalId(named) }, input, null);
  } catch (error) {
    if (isServiceError(error) && error.code === "conversation_not_found") await findOwnConversation(ctx.storage, channel, named);
    throw error;
  }
}

/** Runs the flow and answers; `kept` keeps the answer of a request with a key. */
async function run(
  request: IncomingRequest,
  ctx: ServiceContext,
  channel: ChannelRecord,
  registered: RegisteredFlow,
  existing: Pick<ConversationRecord, "id"> | null,
  input: ExecuteRequest,
  kept: KeptAnswer | null,
): Promise<Reply> {
  const live = input.stream ?? channel.defaultStream;
  // On a channel with resumable streams, a run goes on when its client leaves, and its
  // stream is recorded even when it is answered as JSON: any run can be followed and cancelled.
  const recorded = ctx.streams.records(channel);
  let started = await ctx.runs.start({
    channel,
    flow: registered,
    conversation: existing,
    payload: input.payload,
    metadata: input.metadata,
    request: channel.resumableStreams ? null : request,
    live: live || recorded,
    recorded,
  });
  if (recorded) {
    if (!live) {
      const outcome = await ctx.streams.recordToEnd(started);
      const reply = json(runDocument(outcome, channel, registered));
      return kept ? kept.whole(outcome, reply, false) : reply;
    }
    return ctx.streams.record(kept ? kept.stream(started, false) : started);
  }
  if (!live) {
    const outcome = await runToEnd(started);
    const reply = json(runDocument(outcome, channel, registered));
    return kept ? kept.whole(outcome, reply, !channel.resumableStreams) : reply;
  }
  if (kept) started = kept.stream(started, true);
  const stream = uiMessageStream(started, ctx.logger);
  return { status: 200, headers: { ...UI_STREAM_HEADERS }, body: kept ? kept.watch(stream) : stream };
}

/**
 * The key a publishable key's request is kept under. A server key has one caller, the server
 * that holds it; a publishable key is in every visitor's page, so its keys are the caller's
 * own: scoped to the client address, lest a visitor who guesses another's key and body read
 * that visitor's answer (docs/decisions.md, "Idempotent requests").
 */
async function visitorKey(request: IncomingRequest, ctx: ServiceContext, key: string): Promise<string> {
  const address = ctx.limits.addressOf(request) ?? "";
  return `${(await sha256Hex(address)).slice(0, 32)}:${key}`;
}
