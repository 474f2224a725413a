import { authenticateApiKey } from "../../auth/authenticate.js";
import { verifySignature } from "../../auth/signature.js";
import type { ServiceContext } from "../../context.js";
import { parseJson, readRawBody, requireJsonContentType } from "../../http/body.js";
import { ServiceError } from "../../http/errors.js";
import type { IncomingRequest, Reply } from "../../http/reply.js";
import { json } from "../../http/respond.js";
import { validate } from "../../http/validate.js";
import { RunAbort } from "../../runs/abort.js";
import { driveRun, type RunSteps } from "../../runs/driver.js";
import { runDocument } from "../../runs/json.js";
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

  const runId = crypto.randomUUID();
  const conversationId = existing?.id ?? crypto.randomUUID();
  const abort = new RunAbort();
  const live = input.stream ?? channel.defaultStream;
  const run = tracked(ctx, abort, request, driveRun({
    flow: registered.flow,
    channel,
    runId,
    conversationId,
    existing,
    payload: input.payload,
    metadata: input.metadata ?? {},
    abort,
    storage: ctx.storage,
    estimateTokens: ctx.estimateTokens,
    historyLimit: ctx.historyLimit,
    live,
  }));

  if (!live) {
    let next = await run.next();
    while (!next.done) next = await run.next();
    return json(runDocument(next.value, channel, registered));
  }

  const stream = uiMessageStream(
    runId,
    conversationId,
    run,
    () => abort.abort(),
    (error) => ctx.logger.error(`channelkit: run ${runId} could not be stored`, error),
  );
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

/**
 * Lets `close()` wait for a run that started, even when its response was already sent, and
 * aborts the run when the client goes away or the service closes. This follows
 * the two signals only while the run runs: `AbortSignal.any` would do the same but costs about
 * 40 µs a request on Node 20 (weak references, a finalization registry). A plain stepper
 * rather than a generator delegating with `yield*`: that would add a generator's hops to
 * every event of the run.
 */
function tracked(ctx: ServiceContext, abort: RunAbort, request: IncomingRequest, run: RunSteps): RunSteps {
  const settle = ctx.begin();
  const unfollowShutdown = followShutdown(ctx.shutdown, abort);
  // The client is followed from the run's first step: a stream's first event (sent before the
  // run starts) does not wait for it.
  let unfollowClient: (() => void) | undefined;
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    unfollowClient?.();
    unfollowShutdown();
    settle();
  };
  return {
    async next() {
      if (!unfollowClient && !ended) unfollowClient = followClient(request, abort);
      try {
        const step = await run.next();
        if (step.done) end();
        return step;
      } catch (error) {
        end();
        throw error;
      }
    },
  };
}

/** Aborts the run when the client goes away; returns what stops following it. */
function followClient(request: IncomingRequest, abort: RunAbort): () => void {
  if (request.onClientGone) return request.onClientGone((reason) => abort.abort(reason));
  const signal = request.signal;
  const onAbort = () => abort.abort(signal.reason);
  if (signal.aborted) {
    onAbort();
    return () => undefined;
  }
  signal.addEventListener("abort", onAbort, { once: true });
  return () => signal.removeEventListener("abort", onAbort);
}

/** The runs in flight, per service (keyed by its shutdown signal). */
const runsInFlight = new WeakMap<AbortSignal, Set<RunAbort>>();

/**
 * Aborts the run when the service closes. One listener on the service's long-lived
 * signal aborts every run in flight, rather than one listener per run, which would grow with
 * the number of open streams (and trip Node's listener-leak warning past ten).
 */
function followShutdown(shutdown: AbortSignal, abort: RunAbort): () => void {
  if (shutdown.aborted) {
    abort.abort(shutdown.reason);
    return () => undefined;
  }
  let runs = runsInFlight.get(shutdown);
  if (!runs) {
    const created = new Set<RunAbort>();
    runsInFlight.set(shutdown, created);
    shutdown.addEventListener("abort", () => {
      for (const run of created) run.abort(shutdown.reason);
      created.clear();
    }, { once: true });
    runs = created;
  }
  const set = runs;
  set.add(abort);
  return () => void set.delete(abort);
}
