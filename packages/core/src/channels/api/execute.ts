import { authenticateRequest } from "../../auth/authenticate.js";
import { checkChannelSignature } from "../../auth/channel-signature.js";
import type { ServiceContext } from "../../context.js";
import { parseJson, readRawBody, requireJsonContentType } from "../../http/body.js";
import type { IncomingRequest, Reply } from "../../http/reply.js";
import { json } from "../../http/respond.js";
import { validate } from "../../http/validate.js";
import { runDocument } from "../../runs/json.js";
import { runToEnd, startRun } from "../../runs/start.js";
import { UI_STREAM_HEADERS, uiMessageStream } from "../../runs/ui-stream.js";
import { channelFlow } from "../flow.js";
import { findOwnConversation } from "./conversation.js";
import { executeRequestSchema } from "./schemas.js";

/** `POST /public/v1/api/execute`: runs the channel's flow, answering JSON or the UI message stream. */
export async function execute(request: IncomingRequest, ctx: ServiceContext): Promise<Reply> {
  const { channel } = await authenticateRequest(request, ctx);
  requireJsonContentType(request);
  const body = await readRawBody(request, ctx.maxBodyBytes);
  if (channel.requireSignature) await checkChannelSignature(request, channel, body, ctx);
  const input = validate(executeRequestSchema, parseJson(body));

  const existing = input.conversation_id ? await findOwnConversation(ctx.storage, channel, input.conversation_id) : null;
  const registered = channelFlow(ctx, channel);

  const live = input.stream ?? channel.defaultStream;
  // On a channel with resumable streams, a run goes on when its client leaves, and its
  // stream is recorded even when it is answered as JSON: any run can be followed and cancelled.
  const recorded = ctx.streams.records(channel);
  const run = await startRun(ctx, {
    channel,
    flow: registered,
    conversation: existing,
    payload: input.payload,
    metadata: input.metadata ?? {},
    request: channel.resumableStreams ? null : request,
    live: live || recorded,
    recorded,
  });
  if (recorded) {
    if (!live) return json(runDocument(await ctx.streams.recordToEnd(run), channel, registered));
    return ctx.streams.record(run);
  }
  if (!live) return json(runDocument(await runToEnd(run), channel, registered));
  const stream = uiMessageStream(run, (error) => ctx.logger.error(`channelkit: run ${run.runId} could not be stored`, error));
  return { status: 200, headers: { ...UI_STREAM_HEADERS }, body: stream };
}
