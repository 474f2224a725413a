import { type ChatTurn, chatTurn } from "./chat-turn.js";
import {
  authenticateRequest,
  channelFlow,
  type ChannelRecord,
  checkChannelSignature,
  type IncomingRequest,
  parseJson,
  readRawBody,
  type Reply,
  requireJsonContentType,
  type ServiceContext,
  type StartedRun,
  UI_STREAM_HEADERS,
  uiMessageStream,
} from "../../plugin/api.js";

/**
 * `POST /public/widget/chat`: runs the channel's flow on the user's message and always
 * streams the reply, with exactly execute's stream protocol (so `useChat` reads it). The
 * checks are execute's, in its order, with publishable keys only.
 */
export async function chat(request: IncomingRequest, ctx: ServiceContext): Promise<Reply> {
  const found = await authenticateRequest(request, ctx, { publicKeyOnly: true });
  const { channel } = found;
  requireJsonContentType(request);
  const raw = await readRawBody(request, ctx.maxBodyBytes);
  if (channel.requireSignature) await checkChannelSignature(request, channel, raw, ctx);
  const turn = await chatTurn(parseJson(raw), channel, ctx);
  // Refused past the caps on open streams before the run starts (docs/security.md).
  return ctx.openStreams.forKey(request, found, async () => {
    const run = await start(request, channel, turn, ctx);
    if (ctx.streams.records(channel)) return ctx.streams.record(run);
    const stream = uiMessageStream(run, ctx.logger);
    return { status: 200, headers: { ...UI_STREAM_HEADERS }, body: stream };
  });
}

async function start(request: IncomingRequest, channel: ChannelRecord, turn: ChatTurn, ctx: ServiceContext): Promise<StartedRun> {
  const flow = channelFlow(ctx, channel);
  // On a channel with resumable streams, a run goes on when its client leaves, and its stream is recorded.
  const recorded = ctx.streams.records(channel);
  return ctx.runs.start({
    channel,
    flow,
    conversation: turn.conversation,
    payload: turn.payload,
    metadata: turn.metadata,
    request: channel.resumableStreams ? null : request,
    live: true,
    recorded,
  });
}
