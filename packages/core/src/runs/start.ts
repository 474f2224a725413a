import type { ServiceInternals } from "../context.js";
import { ServiceError } from "../http/errors.js";
import type { IncomingRequest } from "../http/reply.js";
import { newConversationRecord, storedMessage } from "../storage/records.js";
import type { BeginRunInput, ChannelRecord, ConversationRecord, RunConversation, RunTicket } from "../storage/types.js";
import type { RegisteredFlow } from "../context.js";
import type { FlowTrigger } from "../flows/define.js";
import { claimOf, driveRun, type RunPart, type RunSteps, type StreamEnding, type TextPart } from "./driver.js";
import type { RunOutcome } from "./outcome.js";
import { newRecordId } from "./run-id.js";
import { RunTrace } from "../telemetry/run-trace.js";

/** What a channel asks of {@link startRun}. */
export interface StartRunInput {
  channel: ChannelRecord;
  flow: RegisteredFlow;
  /**
   * The conversation the run continues, or null to start a new one. Its id is enough: the
   * run takes its ticket only on a conversation of its channel and tenant, and `startRun`
   * rejects with `conversation_not_found` otherwise (no read is needed before it).
   */
  conversation: Pick<ConversationRecord, "id"> | null;
  /** The user's input (`""` for a `start`). */
  payload: string;
  /**
   * `message` (the default) for a user's message; `start` opens a new conversation without
   * one and runs the flow's `start` (answered whole: `conversation` null, `live` false).
   */
  trigger?: FlowTrigger;
  /** The language of a new conversation (webhook channels). */
  language?: string | null;
  /** The id a new conversation takes (a random UUID when absent); creating it fails if the id exists. */
  newConversationId?: string;
  /** Free contextual data of the request, which the flow reads as `ctx.metadata` (`{}` when absent). */
  metadata?: Record<string, unknown>;
  /**
   * Data kept with the run's user message and shown with it in history as `metadata`: the
   * channel's own ids of the message (a chat platform's user, message and thread ids).
   */
  messageMetadata?: Record<string, unknown>;
  /**
   * The request the run answers: its client going away aborts the run. Null for a run that
   * goes on without its client (a channel with resumable streams).
   */
  request: Pick<IncomingRequest, "signal" | "onClientGone"> | null;
  /** Whether the caller streams the live text (false for a JSON answer). */
  live: boolean;
  /**
   * Whether the run's stream is recorded (a channel with resumable streams): it opens with
   * the run's ticket, and the recorder sets how it ends ({@link StartedRun.endStream}). Needs `live`.
   */
  recorded?: boolean;
  /**
   * Whether the steps hand out the flow's own events too (`{ type: "flow-event", event }`),
   * each after the text parts it made: for a channel that shows tool calls, steps or state.
   */
  flowEvents?: boolean;
  /**
   * Whether another instance may stop the run (`ctx.runs.cancel` there): this instance then
   * listens for stops on the store's feed, from this run on. A run is always stoppable on the
   * instance that runs it.
   */
  stoppable?: boolean;
}

/** A run that has taken its place in its conversation (its steps' parts: text, or {@link RunPart} with `flowEvents`). */
export interface StartedRun<Part extends RunPart = TextPart> {
  runId: string;
  /** Usable at once: the conversation exists, and history shows the run's user message once it runs. */
  conversationId: string;
  /**
   * The run's live text parts, then its outcome. Pull it to the end: the run is stored then,
   * and only then does `close()` stop waiting for it.
   */
  steps: RunSteps<Part>;
  /** Stops the run: it is stored `cancelled` with what it produced so far. */
  cancel(reason?: unknown): void;
  /** How a recorded stream ends: its last chunk is stored with the run's outcome. Set before the steps are pulled. */
  endStream(ending: StreamEnding): void;
}

/**
 * Starts a run of a channel's flow (`ctx.runs.start`): the one way every channel runs a flow. Creates the
 * conversation when it is new and takes the run's ticket in it (the run's turn when no
 * other run of the conversation is queued or in flight), then hands back the steps that
 * wait for the turn, run the flow and store the outcome. Rejects before anything is sent:
 * with `conversation_not_found` when `conversation` is not one of the channel's (an unknown
 * id, another channel's or tenant's), or when the storage fails.
 *
 * `idKnown`: the new conversation's id is one others may derive too (an external key's), so
 * that it is created now, when the run takes its ticket, even for a run answered as JSON: a
 * run that loses the race to create it rejects here, before its flow runs.
 */
export async function startRun(ctx: ServiceInternals, input: StartRunInput, idKnown = false): Promise<StartedRun> {
  const channel = ctx.lifecycle.channels.share(input.channel);
  const trigger = input.trigger ?? "message";
  if (trigger === "start" && (input.conversation !== null || input.live)) {
    throw new Error("channelkit: a start run opens a new conversation and is answered whole (conversation null, live false)");
  }
  const runs = ctx.lifecycle;
  const runId = newRecordId();
  const abort = runs.admit(runId, input.stoppable === true);
  const conversation: RunConversation = {
    id: input.conversation?.id ?? input.newConversationId ?? newRecordId(),
    tenantId: channel.tenantId,
    channelId: channel.id,
    isNew: input.conversation === null,
    language: input.language ?? null,
  };
  const base = {
    flow: input.flow.flow,
    channel,
    runId,
    conversation,
    payload: input.payload,
    estimateTokens: ctx.estimateTokens,
    messageMetadata: input.messageMetadata ?? null,
  };
  const arrivedMs = Date.now();
  const claim = claimOf(base, arrivedMs, runs.leaseMs);
  if (input.recorded) claim.stream = { aliveUntil: claim.leaseUntil };
  const streamEnding: { current: StreamEnding | null } = { current: null };
  // A run answered as JSON that starts a conversation has no observer before its answer:
  // nobody else knows the conversation's id (unless `idKnown`). It is stored whole at its
  // end, in one transaction, instead of a claim now and its outcome then (see docs/benchmarks.md).
  const begun = !(conversation.isNew && !input.live && !idKnown);
  const trace = RunTrace.start(ctx.telemetry, {
    runId,
    conversationId: conversation.id,
    channelId: channel.id,
    channelType: channel.type,
    tenantId: channel.tenantId,
    flowName: input.flow.name,
  });
  let ticket: RunTicket | null;
  try {
    if (!begun) ticket = unbegun(claim);
    else ticket = trace === null ? await ctx.storage.beginRun(claim) : await trace.storage("beginRun", () => ctx.storage.beginRun(claim));
  } catch (error) {
    trace?.end({ status: "failed", turnWaitMs: 0, durationMs: 0 });
    runs.release(abort);
    throw error;
  }
  if (ticket === null) {
    trace?.end({ status: "failed", turnWaitMs: 0, durationMs: 0 });
    runs.release(abort);
    throw new ServiceError("conversation_not_found");
  }
  // Field by field, not a spread: see docs/benchmarks.md, "Why the code looks like this".
  const steps = driveRun(
    {
      flow: base.flow,
      channel,
      runId,
      conversation,
      payload: input.payload,
      trigger,
      estimateTokens: ctx.estimateTokens,
      ticket: ticket.ticket,
      begun,
      claimedAtMs: arrivedMs,
      stream: claim.stream,
      metadata: input.metadata,
      messageMetadata: base.messageMetadata,
      abort,
      storage: ctx.storage,
      lifecycle: runs,
      livechat: ctx.livechat,
      historyLimit: ctx.historyLimit,
      live: input.live,
      flowEvents: input.flowEvents === true,
      streamEnding,
      hooks: ctx.plugins,
      telemetry: ctx.telemetry,
      trace,
    },
    ticket.claimed,
    input.request,
  );
  // Own functions, not a class's methods: a channel may spread a started run ({ ...run, steps }).
  return {
    runId,
    conversationId: conversation.id,
    steps,
    cancel: (reason) => abort.abort(reason),
    endStream: (ending) => {
      streamEnding.current = ending;
    },
  };
}

/** Pulls a run answered whole to its end: its outcome, once stored. */
export async function runToEnd(run: StartedRun): Promise<RunOutcome> {
  let next = await run.steps.next();
  while (!next.done) next = await run.steps.next();
  return next.value;
}

/** The turn of a run that starts its conversation and stores it whole at its end. */
function unbegun(claim: BeginRunInput): RunTicket {
  const id = claim.conversation.id;
  return {
    ticket: 0,
    claimed: { conversation: newConversationRecord(claim.conversation, claim.run.startedAt), userMessage: storedMessage(id, 0, claim.userMessage) },
  };
}
