import type { TokenEstimator } from "../conversations/tokens.js";
import type { Flow, FlowContext, FlowHistoryMessage, FlowTrigger } from "../flows/define.js";
import type { FlowEvent } from "../flows/events.js";
import type {
  BeginRunInput,
  ChannelRecord,
  ClaimedTurn,
  ClaimTurnInput,
  CompleteRunInput,
  ConversationMode,
  MessageRecord,
  ModeChange,
  NewMessage,
  RunConversation,
  RunRecord,
  Storage,
  StoreRunInput,
} from "../storage/types.js";
import type { IncomingRequest } from "../http/reply.js";
import type { LiveChat } from "../livechat/live-chat.js";
import { withHuman } from "../livechat/modes.js";
import type { RunAbort } from "./abort.js";
import { RunTimedOut } from "./deadlines.js";
import { settleFailedRun } from "./settle.js";
import { isServiceError, ServiceError } from "../http/errors.js";
import { TurnPassedOver } from "../storage/turn-passed-over.js";
import type { RunHookEvent } from "../plugin/hooks.js";
import type { PluginRegistry } from "../plugin/registry.js";
import { type HeldTurn, type RunLifecycle, TURN_CLAIM_MS } from "./lifecycle.js";
import type { RunOutcome } from "./outcome.js";
import { isoTimestamp } from "./timestamp.js";
import { agentMessage, type RunEnd, type TextPart, Transcript } from "./transcript.js";
import { type RunTrace, recordRun } from "../telemetry/run-trace.js";
import type { ServiceTelemetry } from "../telemetry/telemetry.js";

export type { TextPart } from "./transcript.js";

/**
 * One of the flow's own events, handed out before the text parts it makes, to a run started
 * with `flowEvents: true`: what a channel shows beyond text (tool calls and their results,
 * steps, state) in the order the flow yielded it.
 */
export interface FlowEventPart {
  type: "flow-event";
  event: FlowEvent;
}

/** A part of a run started with `flowEvents: true`: its text parts and the flow's events. */
export type RunPart = TextPart | FlowEventPart;

/**
 * A run pulled one step at a time: its live text parts (and, when asked for, the flow's
 * events: {@link RunPart}), then its outcome. Call `next()` again only once the previous
 * call settled, as `for await` does.
 */
export interface RunSteps<Part extends RunPart = TextPart> {
  next(): Promise<IteratorResult<Part, RunOutcome>>;
}

/** Everything one run needs; the driver owns nothing else. */
interface RunInput {
  flow: Flow;
  channel: ChannelRecord;
  runId: string;
  conversation: RunConversation;
  /** The run's place in its conversation's queue on arrival (a run passed over takes another: see the driver's). */
  ticket: number;
  /**
   * False for a run that starts its conversation and is answered as JSON: nothing of it is
   * stored before its end, when {@link Storage.storeRun} writes it whole.
   */
  begun: boolean;
  /** When the turn was claimed on arrival (ms), for the run's `started_at`. */
  claimedAtMs: number;
  /** Set when the run's stream is recorded (resumable channels): its row was written with its ticket. */
  stream: { aliveUntil: string } | undefined;
  payload: string;
  /** A `start` run has no user message: it stores only what the flow's `start` produced. */
  trigger: FlowTrigger;
  /** Absent when the request sent none: the flow's `{}` is then made only if read. */
  metadata: Record<string, unknown> | undefined;
  /** Kept with the run's user message. */
  messageMetadata: Record<string, unknown> | null;
  /** Stops the run: it is then stored `cancelled`, with what was produced so far. */
  abort: RunAbort;
  storage: Storage;
  lifecycle: RunLifecycle;
  /** Where a handover goes, and who has a conversation that handed over. */
  livechat: LiveChat;
  estimateTokens: TokenEstimator;
  historyLimit: number;
  /** Whether the caller streams the live text (see {@link Transcript}). */
  live: boolean;
  /** Whether the flow's events are handed out too ({@link FlowEventPart}); absent, they are not. */
  flowEvents?: boolean;
  /** A recorded stream's end (resumable channels), set by its recorder: written with the run's outcome. */
  streamEnding: { current: StreamEnding | null };
  /** The plugins that hear of runs starting and ending. */
  hooks: PluginRegistry;
  /** The service's metrics: a run that ends is counted. */
  telemetry: ServiceTelemetry;
  /** The run's span, when an SDK records it. */
  trace: RunTrace | null;
}

/**
 * Where a recorded run's stream ends: its last events (those not yet written, then the
 * closing one) are stored in the same write as the run's outcome, so that a client that
 * has the outcome never finds the run still in flight, and the end costs no write of its own.
 */
export interface StreamEnding {
  /** The last events (SSE frames) for this outcome, once the chunks before them are written. */
  lastEvents(outcome: RunOutcome): Promise<string>;
  /** They are stored with the outcome. */
  stored(): void;
}

/** Stores a run's completion, with its stream's last chunk when it is recorded. */
async function complete(input: RunInput, completion: CompleteRunInput, outcome: RunOutcome): Promise<void> {
  const ending = input.streamEnding.current;
  if (ending) completion.streamEnd = await ending.lastEvents(outcome);
  await input.storage.completeRun(completion);
  ending?.stored();
}

/**
 * What a run stores when it claims its turn at `nowMs`: its `running` row, its user message
 * and its lease.
 */
export function claimOf(
  input: Pick<RunInput, "flow" | "channel" | "runId" | "conversation" | "payload" | "estimateTokens" | "messageMetadata">,
  nowMs: number,
  leaseMs: number,
): BeginRunInput & { claimUntil: string } {
  const now = isoTimestamp(nowMs);
  const run: RunRecord = {
    id: input.runId,
    conversationId: input.conversation.id,
    channelId: input.channel.id,
    tenantId: input.channel.tenantId,
    status: "running",
    flowName: input.flow.name,
    flowVersion: input.flow.version ?? null,
    result: null,
    error: null,
    executionOrder: [],
    startedAt: now,
    completedAt: now,
    durationMs: 0,
  };
  const userMessage = userMessageOf(input, now);
  const leaseUntil = isoTimestamp(nowMs + leaseMs);
  return { conversation: input.conversation, run, userMessage, now, leaseUntil, claimUntil: isoTimestamp(nowMs + Math.min(leaseMs, TURN_CLAIM_MS)) };
}

/**
 * Drives a run: waits for its conversation's turn unless it has it (`claimed`, the turn it
 * was served on arrival), runs the flow, hands out its text as stream parts while it runs,
 * then stores its outcome, its messages and the flow's state, and passes the turn on. A flow that throws is an `error` outcome; an aborted
 * run is `cancelled`, stored with what was produced so far (a run aborted before its turn
 * came still waits for it, then stores its user message without running the flow; while the
 * service closes, it gives its turn up at once). Only a storage failure makes a step
 * reject. `client` is the request whose client going away aborts the run, followed from the
 * first step (a stream's first event, sent before, does not wait for it); the lifecycle
 * releases the run once it is stored. Nothing given is written to: the driver keeps its own
 * state (its ticket, its turn, a flow's `metadata` made on first read).
 */
export function driveRun(input: RunInput, claimed: ClaimedTurn | null, client: FollowedClient | null = null): RunSteps {
  // Typed as its usual parts: only a run started with `flowEvents` hands out flow events (`Runs.start`'s overloads).
  return new RunDriver(input, claimed, client) as RunSteps;
}

/** The request a run follows: its client going away aborts the run. */
type FollowedClient = Pick<IncomingRequest, "signal" | "onClientGone">;

/** What the flow ended with, before the run's times are known. */
type FlowEnd = Omit<RunEnd, "startedAt" | "completedAt" | "durationMs">;

/**
 * The steps of {@link driveRun}, pulled one at a time. A class rather than an async
 * generator: a streamed run spends most of its life waiting for its flow's next event, and
 * meanwhile it keeps this object and the one promise it waits on, where two generators (the
 * run, and its flow loop delegated to with `yield*`) and the promises chaining them kept
 * about a kilobyte more per open stream (docs/benchmarks.md, "Memory per open stream").
 *
 * Its phases, in order: {@link #begin} waits for the turn (a run whose flow does not run ends
 * there), each step then pulls the flow's events through the transcript until one has parts
 * or the flow ends ({@link #flowEnded}), and {@link #finish} stores the outcome.
 */
class RunDriver implements RunSteps<RunPart> {
  readonly #input: RunInput;
  #client: FollowedClient | null;
  #followed = false;
  /** The turn, once claimed, until the flow runs: then only what the run's end needs of it is kept. */
  #turn: ClaimedTurn | null;
  /** Whether the run's claim on its turn was stored (and answered). */
  #claimed: boolean;
  /** The run's place in its conversation's queue: its input's, or the one it took again when passed over. */
  #ticket: number;
  /** The conversation's mode, and since when, as the run found it. */
  #mode: ConversationMode = "bot";
  #modeSince = "";
  /** The run's user message, for a run stored whole at its end (not `begun`). */
  #userMessage: MessageRecord | null = null;
  #startedMs: number;
  #transcript: Transcript | undefined;
  #held: HeldTurn | null = null;
  /** The flow's events, while it runs. */
  #events: AsyncIterator<FlowEvent, unknown> | undefined;
  /** The channel's limit on the flow's time, in seconds, while the flow runs. */
  #limitSeconds = 0;
  /**
   * Ends the wait for the flow's next event when the run aborts: the wait's own `resolve`,
   * listening to the abort for as long as the wait lasts, so that a run waiting on its flow
   * keeps no listener of its own (docs/benchmarks.md, "Memory per open stream").
   */
  #wake: ((value: unknown) => void) | null = null;
  /** What the flow ended with, once it ended. */
  #end: FlowEnd | undefined;
  /** The parts of the last event, handed out one per step. */
  #parts: readonly RunPart[] = NO_PARTS;
  #nextPart = 0;
  /** Whether the run ended (stored, or failed to be): every later step is done. */
  #over = false;

  constructor(input: RunInput, claimed: ClaimedTurn | null, client: FollowedClient | null) {
    this.#input = input;
    this.#client = client;
    // The driver keeps the turn, and only until its flow runs (see #begin).
    this.#turn = claimed;
    this.#claimed = claimed !== null;
    this.#ticket = input.ticket;
    this.#startedMs = input.claimedAtMs;
  }

  async next(): Promise<IteratorResult<RunPart, RunOutcome>> {
    if (this.#nextPart < this.#parts.length) return { done: false, value: this.#handOut() };
    if (this.#over) return { done: true, value: undefined as never };
    if (!this.#followed) this.#followClient();
    try {
      if (!this.#transcript) {
        const early = await this.#begin();
        if (early) return this.#ended(early);
      }
      const { abort } = this.#input;
      const transcript = this.#transcript as Transcript;
      // The flow's events, one per turn of this loop, until one has parts to hand out. Inline
      // rather than a method of its own: an async call suspended in another is a few hundred
      // bytes more for as long as the stream waits (docs/benchmarks.md, "Memory per open stream").
      while (this.#end === undefined) {
        let end: FlowEnd | undefined;
        let parts: readonly RunPart[] = NO_PARTS;
        try {
          const woken = abort.aborted ? abort.reason : await this.#nextEvent(this.#events as AsyncIterator<FlowEvent, unknown>);
          // The wait ends with the abort's reason or a step (the flow's own new object, never the reason).
          const step = woken as IteratorResult<FlowEvent, unknown>;
          if (abort.aborted && woken === abort.reason) end = CANCELLED;
          else if (step.done) end = { status: "success", result: step.value ?? null, error: null };
          else {
            if (step.value.type === "step") this.#input.trace?.step(step.value.name, step.value.nodeType);
            parts = this.#input.flowEvents ? withEvent(step.value, transcript.apply(step.value)) : transcript.apply(step.value);
          }
        } catch (thrown) {
          end = abort.aborted ? CANCELLED : this.#flowFailed(thrown);
        }
        this.#stopWaking();
        if (end) parts = this.#flowEnded(end, transcript);
        if (parts.length > 0) {
          this.#parts = parts;
          this.#nextPart = 0;
          return { done: false, value: this.#handOut() };
        }
      }
      this.#over = true;
      return this.#ended(await this.#finish(this.#end, this.#transcript as Transcript));
    } catch (error) {
      this.#failed(error);
      throw error;
    }
  }

  /**
   * The storage failed before the run was stored: the run is over for its client, and a run
   * that took its ticket gives it back (with its turn, when it held it) once the storage
   * answers again, rather than after its lease.
   */
  #failed(error: unknown): void {
    const input = this.#input;
    if (this.#held) input.lifecycle.releaseTurn(this.#held);
    // A refusal (a run that waited too long) was stored before it was thrown.
    if (input.begun && !isServiceError(error)) {
      const { run, userMessage } = claimOf(input, this.#startedMs, input.lifecycle.leaseMs);
      settleFailedRun({
        storage: input.storage,
        lifecycle: input.lifecycle,
        run,
        conversation: input.conversation,
        ticket: this.#ticket,
        claimed: this.#claimed,
        userMessage,
        recorded: input.stream !== undefined,
      });
    }
    this.#ended(undefined);
  }

  /** The run is over (stored, or failed to be): the lifecycle releases it, and it is counted. */
  #ended(outcome: RunOutcome | undefined): IteratorResult<RunPart, RunOutcome> {
    this.#over = true;
    const input = this.#input;
    // Nothing is made for a run that no SDK measures nor traces.
    if (input.trace !== null || input.telemetry.metered) {
      const ending = {
        status: outcome ? outcome.status : "failed",
        turnWaitMs: this.#startedMs - input.claimedAtMs,
        durationMs: outcome ? outcome.durationMs : Date.now() - this.#startedMs,
      };
      recordRun(input.telemetry, input.channel.type, ending);
      input.trace?.end(ending);
    }
    this.#input.lifecycle.release(this.#input.abort);
    return { done: true, value: outcome as RunOutcome };
  }

  /** The next part of the last event's; the parts are let go with the last one. */
  #handOut(): RunPart {
    const part = this.#parts[this.#nextPart++] as RunPart;
    if (this.#nextPart === this.#parts.length) this.#parts = NO_PARTS;
    return part;
  }

  #followClient(): void {
    this.#followed = true;
    const client = this.#client;
    // The request is not kept once followed: a stream may stay open for minutes.
    this.#client = null;
    // Followed for the request's life, not unfollowed at the run's end: a client that leaves
    // then aborts a run that is over, which does nothing, and what unfollowing would keep for
    // the run's whole life (a function and its scope) is more than that listener.
    if (client) this.#input.lifecycle.followClient(client, this.#input.abort);
  }

  /**
   * Waits for the run's turn unless it has it, then starts the flow; the outcome instead when
   * the flow does not run (aborted before its turn came, or a human has the conversation).
   */
  async #begin(): Promise<RunOutcome | undefined> {
    const input = this.#input;
    const { abort, lifecycle } = input;
    // A run aborted while it waits still waits for its turn, and is then stored `cancelled`
    // without running its flow: its user message comes after the runs before it, not between
    // one's question and its answer (decisions.md: runs take turns in arrival order). Only a
    // service that closes gives the turn up at once, for it must not wait on other instances.
    // Measured from the run's arrival, with no clock read for a run whose turn came at once.
    const waitUntil = input.claimedAtMs + lifecycle.waitTimeoutMs;
    for (let attempt = 0; !this.#turn && !(abort.aborted && lifecycle.closed); attempt++) {
      await lifecycle.awaitTurn(input.conversation.id, attempt, abort);
      if (abort.aborted && lifecycle.closed) break;
      this.#startedMs = Date.now();
      if (this.#startedMs > waitUntil) return this.#waitedTooLong();
      const claim: ClaimTurnInput = { ...claimOf(input, this.#startedMs, lifecycle.leaseMs), ticket: this.#ticket };
      if (input.stream) claim.stream = input.stream;
      this.#turn = await this.#claimTurn(claim);
      this.#claimed = this.#turn !== null;
    }
    const transcript = new Transcript({ runId: input.runId, estimateTokens: input.estimateTokens, live: input.live });
    this.#transcript = transcript;
    const turn = this.#turn;
    if (!turn) return giveUpTurn(input, this.#ticket, transcript);
    if (input.trigger === "message" && turn.conversation.mode !== "bot") {
      // A human has the conversation: the user's message goes to them, and the flow does not run.
      const { mode } = input.livechat.state(input.channel, turn.conversation, this.#startedMs);
      if (withHuman(mode)) return humanTurn(input, this.#ticket, turn, transcript, this.#startedMs, mode);
    }
    if (input.begun) {
      this.#held = lifecycle.holdTurn({
        storage: input.storage,
        runId: input.runId,
        conversationId: input.conversation.id,
        ticket: this.#ticket,
        sinceMs: this.#startedMs,
      });
    }
    // A flow that runs past its channel's limit is stopped through the run's own abort.
    this.#limitSeconds = input.channel.runTimeoutSeconds ?? DEFAULT_RUN_TIMEOUT_SECONDS;
    lifecycle.deadlines.start(abort, this.#limitSeconds);
    // An aborted run is stored `cancelled` by the first step: its flow is not even called.
    this.#events = abort.aborted ? NO_EVENTS : flowIterator(input.flow, new RunFlowContext(input, turn));
    if (input.hooks.hears("runStarted")) input.hooks.notify("runStarted", { ...hookEvent(input), payload: input.payload });
    // The turn's records are let go for as long as the flow runs: a stream may stay open for
    // minutes, and they are a few hundred bytes (docs/benchmarks.md, "Memory per open stream").
    this.#mode = turn.conversation.mode;
    this.#modeSince = turn.conversation.modeSince;
    if (!input.begun) this.#userMessage = turn.userMessage;
    this.#turn = null;
    return undefined;
  }

  /**
   * The run waited for its turn past the service's limit: it gives its ticket back, stored
   * as an `error` without its user message (its client is told to send it again, which a
   * stored message would duplicate), and its client is answered `503 conversation_busy`. A
   * run whose client already left is stored `cancelled` with its user message instead, as
   * any run whose client left (docs/reliability.md).
   */
  async #waitedTooLong(): Promise<RunOutcome> {
    const input = this.#input;
    const transcript = new Transcript({ runId: input.runId, estimateTokens: input.estimateTokens, live: input.live });
    if (input.abort.aborted) return giveUpTurn(input, this.#ticket, transcript);
    await giveUpTurn(input, this.#ticket, transcript, TURN_WAIT_ERROR);
    throw new ServiceError("conversation_busy", undefined, { headers: { "retry-after": BUSY_RETRY_AFTER } });
  }

  /** Claims the turn; a run whose ticket was passed over takes a new one, at the end of the queue. */
  async #claimTurn(claim: ClaimTurnInput): Promise<ClaimedTurn | null> {
    const input = this.#input;
    try {
      const trace = input.trace;
      return await (trace === null ? input.storage.claimTurn(claim) : trace.storage("claimTurn", () => input.storage.claimTurn(claim)));
    } catch (error) {
      // A recorded run's row carries its ticket from the start: it cannot queue again.
      if (!isTurnPassedOver(error) || input.stream) throw error;
      input.lifecycle.logger.warn(`channelkit: run ${input.runId} missed its turn in conversation ${input.conversation.id}; it queues again`);
      const again = await input.storage.beginRun(claim);
      if (again === null) throw error;
      this.#ticket = again.ticket;
      return again.claimed;
    }
  }

  /**
   * The flow's next event, or the abort's reason once the run aborts: each wait also ends
   * when the run aborts, so that a flow that ignores its signal is not waited for.
   */
  #nextEvent(events: AsyncIterator<FlowEvent, unknown>): Promise<unknown> {
    const abort = this.#input.abort;
    return new Promise((resolve, reject) => {
      this.#wake = resolve;
      abort.listen(resolve);
      // The flow runs in the run's span: what it starts (a model's call) is the run's.
      const trace = this.#input.trace;
      (trace === null ? events.next() : trace.within(() => events.next())).then(resolve, reject);
    });
  }

  /** The wait for the flow's event is over: its `resolve` no longer listens to the abort. */
  #stopWaking(): void {
    if (this.#wake === null) return;
    this.#input.abort.offAbort(this.#wake);
    this.#wake = null;
  }

  /**
   * The flow threw: its client gets the message, the server's log the error itself, with the
   * ids that find the run, since nothing else on the server would tell of it.
   */
  #flowFailed(thrown: unknown): FlowEnd {
    const { lifecycle, flow, runId, channel, conversation } = this.#input;
    lifecycle.logger.error(`channelkit: flow "${flow.name}" failed: run ${runId}, channel ${channel.id}, conversation ${conversation.id}`, thrown, {
      run_id: runId,
      channel_id: channel.id,
      conversation_id: conversation.id,
    });
    return { status: "error", result: null, error: thrown instanceof Error ? thrown.message : String(thrown) };
  }

  /** The flow ended: what it ended with is kept, and the text left open is closed. */
  #flowEnded(end: FlowEnd, transcript: Transcript): readonly TextPart[] {
    const { abort, lifecycle } = this.#input;
    lifecycle.deadlines.end(abort, this.#limitSeconds);
    if (end.status === "cancelled") {
      if (abort.reason instanceof RunTimedOut) {
        // Not the client's doing: the flow failed to end in time, and the run says so.
        end = { status: "error", result: null, error: abort.reason.message };
      }
      // The flow may be suspended inside its own await; it is told through ctx.signal.
      const events = this.#events;
      void Promise.resolve(events?.return?.(undefined)).catch(() => undefined);
    }
    this.#events = undefined;
    this.#end = end;
    return transcript.end();
  }

  /** Stores the outcome of a run whose flow ran, and passes the turn on. */
  async #finish(end: FlowEnd, transcript: Transcript): Promise<RunOutcome> {
    const input = this.#input;
    const { lifecycle, storage } = input;
    if (this.#held) lifecycle.releaseTurn(this.#held);
    // A handover is stored once the flow ended well, as waiting when someone can take it.
    const handedOver = end.status === "success" && transcript.handedOver;
    const available = handedOver && (await input.livechat.available(input.channel, input.conversation.id));
    if (!available) transcript.refuseHandover();
    const completedMs = Date.now();
    const outcome = transcript.outcome(input.runId, input.conversation.id, {
      status: end.status,
      result: end.result,
      error: end.error,
      startedAt: isoTimestamp(this.#startedMs),
      completedAt: isoTimestamp(completedMs),
      durationMs: completedMs - this.#startedMs,
    });
    const change = modeChange(this.#mode, this.#modeSince, handedOver, available, outcome.completedAt);
    if (!input.begun) {
      const messages = input.trigger === "start" ? outcome.produced : [this.#userMessage as NewMessage].concat(outcome.produced);
      const whole: StoreRunInput = { run: recordOf(input, outcome), conversation: input.conversation, messages };
      if (transcript.flowState) whole.flowState = transcript.flowState.value;
      if (change) whole.mode = change.to;
      await (input.trace === null ? storage.storeRun(whole) : input.trace.storage("storeRun", () => storage.storeRun(whole)));
      if (change) input.livechat.afterRun(input.channel, input.conversation.id, change, null);
      if (input.hooks.hears("runEnded")) input.hooks.notify("runEnded", { ...hookEvent(input), outcome });
      return outcome;
    }
    const completion: CompleteRunInput = {
      run: recordOf(input, outcome),
      conversation: input.conversation,
      ticket: this.#ticket,
      claimed: true,
      messages: outcome.produced,
      claimUntil: isoTimestamp(completedMs + lifecycle.claimMs),
    };
    // The flow state when the flow set one (a present key, even `undefined`, sets it).
    if (transcript.flowState) completion.flowState = transcript.flowState.value;
    if (change) completion.mode = change;
    await (input.trace === null ? complete(input, completion, outcome) : input.trace.storage("completeRun", () => complete(input, completion, outcome)));
    lifecycle.turnPassed(input.conversation.id);
    if (change) input.livechat.afterRun(input.channel, input.conversation.id, change, null);
    if (input.hooks.hears("runEnded")) input.hooks.notify("runEnded", { ...hookEvent(input), outcome });
    return outcome;
  }
}

/** What every run hook is told of the run. */
function hookEvent(input: RunInput): RunHookEvent {
  return { runId: input.runId, conversationId: input.conversation.id, channel: input.channel, flowName: input.flow.name, metadata: input.metadata ?? {} };
}

const NO_PARTS: readonly TextPart[] = Object.freeze([]);

/**
 * The parts an event made, then the event: a step or a tool call closes the text before it,
 * and a message's text comes before its tool calls. A delta is its text part alone.
 */
function withEvent(event: FlowEvent, parts: readonly TextPart[]): readonly RunPart[] {
  if (event.type === "text-delta") return parts;
  return [...parts, { type: "flow-event", event }];
}

/** How a flow stopped by the run's abort ends. */
const CANCELLED: FlowEnd = Object.freeze({ status: "cancelled", result: null, error: null });

/**
 * How a run that ran the flow moves the conversation: a handover to waiting (or
 * unavailable when nobody can take it), an ended live chat back to the bot, else not at all.
 * The live chat gets its id when an agent accepts it, not here (interface.md: the id of the
 * active or closed live chat).
 */
function modeChange(from: ConversationMode, since: string, handedOver: boolean, available: boolean, at: string): ModeChange | undefined {
  if (handedOver) return { from, since, to: available ? "livechat_waiting" : "livechat_unavailable", at };
  return from === "bot" ? undefined : { from, since, to: "bot", at };
}

/**
 * A user's message while a human has the conversation: stored for the human side
 * (`origin: "livechat"`, `sender: "user"`) with a `pending` run that produced nothing and
 * reports the mode, then told to the provider.
 */
async function humanTurn(
  input: RunInput,
  ticket: number,
  turn: ClaimedTurn,
  transcript: Transcript,
  startedMs: number,
  mode: ConversationMode,
): Promise<RunOutcome> {
  const completedMs = Date.now();
  const outcome = transcript.outcome(input.runId, input.conversation.id, {
    status: "success",
    result: null,
    error: null,
    startedAt: isoTimestamp(startedMs),
    completedAt: isoTimestamp(completedMs),
    durationMs: completedMs - startedMs,
  });
  outcome.status = "pending";
  outcome.livechatMode = mode;
  // Every message of a live chat has its id, as the human side's do when their provider gives none.
  const livechatMessageId = crypto.randomUUID();
  await complete(
    input,
    {
      run: recordOf(input, outcome),
      conversation: input.conversation,
      ticket,
      claimed: true,
      messages: [],
      liveChatUserTurn: turn.userMessage.turnIndex,
      liveChatUserMessageId: livechatMessageId,
      claimUntil: isoTimestamp(completedMs + input.lifecycle.claimMs),
    },
    outcome,
  );
  input.lifecycle.turnPassed(input.conversation.id);
  input.livechat.afterRun(input.channel, input.conversation.id, undefined, { ...turn.userMessage, origin: "livechat", sender: "user", livechatMessageId });
  return outcome;
}

/**
 * The flow's events: its `run`, or its `start` for a `start` run (none without one). A flow
 * that throws before its first event fails like one that throws later.
 */
function flowIterator(flow: Flow, ctx: FlowContext): AsyncIterator<FlowEvent, unknown> {
  try {
    if (ctx.trigger === "start") return flow.start ? flow.start(ctx)[Symbol.asyncIterator]() : NO_EVENTS;
    return flow.run(ctx)[Symbol.asyncIterator]();
  } catch (error) {
    return { next: () => Promise.reject(error) };
  }
}

/**
 * A run that gives its ticket up before its turn came: aborted while the service closes,
 * stored `cancelled` with its user message at once rather than after the runs before it;
 * or `refused` (it waited too long), stored as that `error` without its user message.
 */
async function giveUpTurn(input: RunInput, ticket: number, transcript: Transcript, refused: string | null = null): Promise<RunOutcome> {
  const nowMs = Date.now();
  const now = isoTimestamp(nowMs);
  const outcome = transcript.outcome(input.runId, input.conversation.id, {
    status: refused === null ? "cancelled" : "error",
    result: null,
    error: refused,
    startedAt: now,
    completedAt: now,
    durationMs: 0,
  });
  await complete(
    input,
    {
      run: recordOf(input, outcome),
      conversation: input.conversation,
      ticket,
      claimed: false,
      // A refused run's client sends its message again: storing it now would store it twice.
      messages: refused === null ? [userMessageOf(input, now)] : [],
      claimUntil: isoTimestamp(nowMs + input.lifecycle.claimMs),
    },
    outcome,
  );
  input.lifecycle.turnPassed(input.conversation.id);
  return outcome;
}

function recordOf(input: RunInput, outcome: RunOutcome): RunRecord {
  return {
    id: input.runId,
    conversationId: input.conversation.id,
    channelId: input.channel.id,
    tenantId: input.channel.tenantId,
    status: outcome.status,
    flowName: input.flow.name,
    flowVersion: input.flow.version ?? null,
    result: outcome.result,
    error: outcome.error,
    executionOrder: outcome.executionOrder,
    startedAt: outcome.startedAt,
    completedAt: outcome.completedAt,
    durationMs: outcome.durationMs,
  };
}

/** How long a run may last when its channel sets no limit, in seconds. */
export const DEFAULT_RUN_TIMEOUT_SECONDS = 300;

/** Whether `error` is a {@link TurnPassedOver}, by name too: a store may come with its own copy of core. */
function isTurnPassedOver(error: unknown): error is TurnPassedOver {
  return error instanceof TurnPassedOver || (error instanceof Error && error.name === "TurnPassedOver");
}

/** What a run that waited for its turn past the service's limit is stored with. */
const TURN_WAIT_ERROR =
  "The conversation was busy: this run waited for its turn longer than the service allows (turnWaitTimeoutMs), and ran nothing. Its client was answered 503 conversation_busy.";

/** The `Retry-After` of a `conversation_busy` answer, in seconds. */
const BUSY_RETRY_AFTER = "5";

/** The events of a flow that has nothing to do. */
const NO_EVENTS: AsyncIterator<FlowEvent, unknown> = { next: async () => ({ done: true, value: null }) };

/** The run's user message, as stored when it claims its turn. */
function userMessageOf(input: Pick<RunInput, "runId" | "payload" | "estimateTokens" | "messageMetadata">, timestamp: string): NewMessage {
  const message = agentMessage(input.runId, "user", input.payload, timestamp, input.estimateTokens(input.payload), null, null);
  message.metadata = input.messageMetadata;
  return message;
}

/** The conversation's most recent messages before this run's own user message, oldest first. */
async function historyBefore(storage: Storage, conversationId: string, own: number, limit: number): Promise<FlowHistoryMessage[]> {
  if (own === 0 || limit <= 0) return [];
  const messages = await storage.listRecentMessages(conversationId, limit + 1);
  const before = messages.filter((message) => message.turnIndex < own).slice(-limit);
  return before.map(({ role, content, toolCalls, toolCallId }) => ({ role, content, toolCalls, toolCallId }));
}

/**
 * A run's FlowContext. A class rather than an object literal: V8 keeps a literal with a getter
 * as a dictionary, 1 KB of each open stream's heap (docs/benchmarks.md, "Memory per open
 * stream"). What most flows never read is made on first read: `signal` (an `AbortSignal`),
 * `channel`, an absent `metadata`'s `{}`, and `history`, an own function once made, so that a flow may destructure it
 * (`run({ payload, history })`).
 */
class RunFlowContext implements FlowContext {
  readonly payload: string;
  readonly trigger: FlowTrigger;
  readonly language: string | null;
  readonly runId: string;
  readonly conversationId: string;
  readonly isNewConversation: boolean;
  readonly state: unknown;
  readonly #input: RunInput;
  /** The turn index of the run's user message: history is what came before it. */
  readonly #userTurn: number;
  #channel: FlowContext["channel"] | undefined;
  #history: FlowContext["history"] | undefined;
  #metadata: Record<string, unknown> | undefined;
  constructor(input: RunInput, turn: ClaimedTurn) {
    this.payload = input.payload;
    this.trigger = input.trigger;
    this.language = turn.conversation.language;
    this.runId = input.runId;
    this.conversationId = input.conversation.id;
    this.isNewConversation = input.conversation.isNew;
    this.state = turn.conversation.flowState ?? undefined;
    this.#input = input;
    this.#userTurn = turn.userMessage.turnIndex;
  }
  get channel(): FlowContext["channel"] {
    const { channel } = this.#input;
    this.#channel ??= { id: channel.id, environment: channel.environment, type: channel.type };
    return this.#channel;
  }
  get history(): FlowContext["history"] {
    this.#history ??= (limit = this.#input.historyLimit) => historyBefore(this.#input.storage, this.conversationId, this.#userTurn, limit);
    return this.#history;
  }
  get signal(): AbortSignal {
    return this.#input.abort.signal;
  }
  get metadata(): Record<string, unknown> {
    // The request's own object when it sent one; the `{}` made on first read is kept here, not on the input.
    this.#metadata ??= this.#input.metadata ?? {};
    return this.#metadata;
  }
}
