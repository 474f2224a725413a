import { authenticateApiKey } from "../../auth/authenticate.js";
import { verifySignature } from "../../auth/signature.js";
import type { ServiceContext } from "../../context.js";
import { parseJson, readRawBody, requireJsonContentType } from "../../http/body.js";
import { ServiceError } from "../../http/errors.js";
import { json } from "../../http/respond.js";
import { validate } from "../../http/validate.js";
import { driveRun } from "../../runs/driver.js";
import { runDocument } from "../../runs/json.js";
import { UI_STREAM_HEADERS, uiMessageStream } from "../../runs/ui-stream.js";
import type { ChannelRecord } from "../../storage/types.js";
import { findOwnConversation } from "./conversation.js";
import { executeRequestSchema } from "./schemas.js";

/** `POST /public/v1/api/execute`: runs the channel's flow, answering JSON or the UI message stream. */
export async function execute(request: Request, ctx: ServiceContext): Promise<Response> {
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

  const runId = crypto.randomUUID();
  const conversationId = existing?.id ?? crypto.randomUUID();
  const controller = new AbortController();
  const signal = AbortSignal.any([controller.signal, request.signal, ctx.shutdown]);
  const run = tracked(ctx, driveRun({
    flow: registered.flow,
    channel,
    runId,
    conversationId,
    existing,
    payload: input.payload,
    metadata: input.metadata ?? {},
    signal,
    storage: ctx.storage,
    estimateTokens: ctx.estimateTokens,
    historyLimit: ctx.historyLimit,
  }));

  if (!(input.stream ?? channel.defaultStream)) {
    let next = await run.next();
    while (!next.done) next = await run.next();
    return json(runDocument(next.value, channel, registered));
  }

  const body$ = uiMessageStream(
    runId,
    conversationId,
    run,
    () => controller.abort(),
    (error) => ctx.logger.error(`channelkit: run ${runId} could not be stored`, error),
  );
  return new Response(body$, { status: 200, headers: UI_STREAM_HEADERS });
}

async function checkSignature(request: Request, channel: ChannelRecord, body: Uint8Array, ctx: ServiceContext) {
  const sealed = channel.signingSecretEncrypted;
  const secret = sealed === null ? null : await ctx.secrets.decrypt(sealed);
  if (secret === null) {
    if (sealed !== null) ctx.logger.error(`channelkit: the signing secret of channel ${channel.id} cannot be decrypted with the configured master key`);
    throw new ServiceError("signing_secret_unavailable");
  }
  await verifySignature(request.headers.get("x-service-signature"), secret, body);
}

/** Lets `close()` wait for a run that started, even when its response was already sent. */
async function* tracked<T, R>(ctx: ServiceContext, run: AsyncGenerator<T, R, void>): AsyncGenerator<T, R, void> {
  let settle!: () => void;
  ctx.track(new Promise<void>((resolve) => (settle = resolve)));
  try {
    return yield* run;
  } finally {
    settle();
  }
}
