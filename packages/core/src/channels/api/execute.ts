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
  const run = await startRun(ctx, {
    channel,
    flow: registered,
    conversation: existing,
    payload: input.payload,
    metadata: input.metadata ?? {},
    // On a channel with resumable streams, a run goes on when its client leaves.
    request: channel.resumableStreams ? null : request,
    live,
  });
  if (!live) return json(runDocument(await runToEnd(run), channel, registered));
  if (channel.resumableStreams && ctx.streams.available) return ctx.streams.record(run);
  const stream = uiMessageStream(run, (error) => ctx.logger.error(`channelkit: run ${run.runId} could not be stored`, error));
  return { status: 200, headers: { ...UI_STREAM_HEADERS }, body: stream };
}
