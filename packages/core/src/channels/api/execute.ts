import { authenticateApiKey } from "../../auth/authenticate.js";
import { verifySignature } from "../../auth/signature.js";
import type { ServiceContext } from "../../context.js";
import { parseJson, readRawBody, requireJsonContentType } from "../../http/body.js";
import { ServiceError } from "../../http/errors.js";
import type { IncomingRequest, Reply } from "../../http/reply.js";
import { json } from "../../http/respond.js";
import { validate } from "../../http/validate.js";
import { runDocument } from "../../runs/json.js";
import { startRun } from "../../runs/start.js";
import { UI_STREAM_HEADERS, uiMessageStream } from "../../runs/ui-stream.js";
import type { ChannelRecord } from "../../storage/types.js";
import { findOwnConversation } from "./conversation.js";
import { executeRequestSchema } from "./schemas.js";

/** `POST /public/v1/api/execute`: runs the channel's flow, answering JSON or the UI message stream. */
export async function execute(request: IncomingRequest, ctx: ServiceContext): Promise<Reply> {
  const { channel } = await authenticateApiKey(request, ctx.storage, new Date());
  requireJsonContentType(request);
  const body = await readRawBody(request, ctx.maxBodyBytes);
  if (channel.requireSignature) await checkSignature(request, channel, body, ctx);
  const input = validate(executeRequestSchema, parseJson(body));

  const existing = input.conversation_id ? await findOwnConversation(ctx.storage, channel, input.conversation_id) : null;
  const registered = ctx.flows.get(channel.flowName);
  if (!registered) {
    ctx.logger.error(`channelkit: channel ${channel.id} is bound to flow "${channel.flowName}", which is not registered`);
    throw new ServiceError("runtime_error");
  }

  const live = input.stream ?? channel.defaultStream;
  const run = await startRun(ctx, {
    channel,
    flow: registered,
    conversation: existing,
    payload: input.payload,
    metadata: input.metadata ?? {},
    request,
    live,
  });
  if (!live) {
    let next = await run.steps.next();
    while (!next.done) next = await run.steps.next();
    return json(runDocument(next.value, channel, registered));
  }
  const stream = uiMessageStream(run, (error) => ctx.logger.error(`channelkit: run ${run.runId} could not be stored`, error));
  return { status: 200, headers: { ...UI_STREAM_HEADERS }, body: stream };
}

async function checkSignature(request: IncomingRequest, channel: ChannelRecord, body: Uint8Array, ctx: ServiceContext) {
  const sealed = channel.signingSecretEncrypted;
  const secret = sealed === null ? null : await ctx.secrets.decrypt(sealed);
  if (secret === null) {
    if (sealed !== null) ctx.logger.error(`channelkit: the signing secret of channel ${channel.id} cannot be decrypted with the configured master key`);
    throw new ServiceError("signing_secret_unavailable");
  }
  await verifySignature(request.headers.get("x-service-signature"), secret, body);
}
