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
  ConversationRecord,
  ModeChange,
  NewMessage,
  RunConversation,
  RunRecord,
  Storage,
  StoreRunInput,
} from "../storage/types.js";
import type { LiveChat } from "../livechat/live-chat.js";
import { withHuman } from "../livechat/modes.js";
import type { RunAbort } from "./abort.js";
import type { RunLifecycle } from "./lifecycle.js";
import type { RunOutcome } from "./outcome.js";
import { isoTimestamp } from "./timestamp.js";
import { agentMessage, type RunEnd, type TextPart, Transcript } from "./transcript.js";

export type { TextPart } from "./transcript.js";

/** A run pulled one step at a time: its live text parts, then its outcome. */
export interface RunSteps {
  next(): Promise<IteratorResult<TextPart, RunOutcome>>;
}

/** Everything one run needs; the driver owns nothing else. */
interface RunInput {
  flow: Flow;
  channel: ChannelRecord;
  runId: string;
  conversation: RunConversation;
  /** The run's place in its conversation's queue, and its turn when it was claimed on arrival. */
  ticket: number;
  claimed: ClaimedTurn | null;
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
  metadata: Record<string, unknown>;
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
  /** A recorded stream's end (resumable channels), set by its recorder: written with the run's outcome. */
  streamEnding: { current: StreamEnding | null };
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
  input: Pick<RunInput, "flow" | "channel" | "runId" | "conversation" | "payload" | "estimateTokens">,
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
  const userMessage = userMessageOf(input.runId, input.payload, now, input.estimateTokens);
  return { conversation: input.conversation, run, userMessage, now, leaseUntil: isoTimestamp(nowMs + leaseMs), claimUntil: isoTimestamp(nowMs + leaseMs) };
}

/**
 * Drives a run: waits for its conversation's turn unless it has it, runs the flow, yields its
 * text as stream parts while it runs, then stores its outcome, its messages and the flow's
 * state, and passes the turn on. A flow that throws is an `error` outcome; an aborted run is
 * `cancelled`, stored with what was produced so far (a run aborted before its turn came
 * stores its user message and gives its turn up). Only a storage failure makes this throw.
 */
export async function* driveRun(input: RunInput): AsyncGenerator<TextPart, RunOutcome, void> {
  const { abort, lifecycle, storage } = input;
  let turn = input.claimed;
  let startedMs = input.claimedAtMs;
  for (let attempt = 0; !turn && !abort.aborted; attempt++) {
    await lifecycle.awaitTurn(input.conversation.id, attempt, abort);
    if (abort.aborted) break;
    startedMs = Date.now();
    const claim: ClaimTurnInput = { ...claimOf(input, startedMs, lifecycle.leaseMs), ticket: input.ticket };
    if (input.stream) claim.stream = input.stream;
    turn = await storage.claimTurn(claim);
  }
  const transcript = new Transcript({ runId: input.runId, estimateTokens: input.estimateTokens, live: input.live });
  if (!turn) return giveUpTurn(input, transcript);
  const conversation = turn.conversation;
  if (input.trigger === "message" && conversation.mode !== "bot") {
    // A human has the conversation: the user's message goes to them, and the flow does not run.
    const { mode } = input.livechat.state(input.channel, conversation, startedMs);
    if (withHuman(mode)) return humanTurn(input, turn, transcript, startedMs, mode);
  }

  const held = input.begun
    ? lifecycle.holdTurn({ storage, runId: input.runId, conversationId: input.conversation.id, ticket: input.ticket, sinceMs: startedMs })
    : null;
  let end: Omit<RunEnd, "startedAt" | "completedAt" | "durationMs">;
  try {
    end = yield* runFlow(input, turn, transcript);
  } finally {
    if (held) lifecycle.releaseTurn(held);
  }
  // A handover is stored once the flow ended well, as waiting when someone can take it.
  const handedOver = end.status === "success" && transcript.handedOver;
  const available = handedOver && (await input.livechat.available(input.channel, input.conversation.id));
  if (!available) transcript.refuseHandover();
  const completedMs = Date.now();
  const outcome = transcript.outcome(input.runId, input.conversation.id, {
    status: end.status,
    result: end.result,
    error: end.error,
    startedAt: isoTimestamp(startedMs),
    completedAt: isoTimestamp(completedMs),
    durationMs: completedMs - startedMs,
  });
  const change = modeChange(conversation, handedOver, available, outcome.completedAt);
  if (!input.begun) {
    const messages = input.trigger === "start" ? outcome.produced : [turn.userMessage as NewMessage].concat(outcome.produced);
    const whole: StoreRunInput = { run: recordOf(input, outcome), conversation: input.conversation, messages };
    if (transcript.flowState) whole.flowState = transcript.flowState.value;
    if (change) whole.mode = change.to;
    await storage.storeRun(whole);
    if (change) input.livechat.afterRun(input.channel, input.conversation.id, change, null);
    return outcome;
  }
  const completion: CompleteRunInput = {
    run: recordOf(input, outcome),
    conversation: input.conversation,
    ticket: input.ticket,
    claimed: true,
    messages: outcome.produced,
    claimUntil: isoTimestamp(completedMs + lifecycle.leaseMs),
  };
  // The flow state when the flow set one (a present key, even `undefined`, sets it).
  if (transcript.flowState) completion.flowState = transcript.flowState.value;
  if (change) completion.mode = change;
  await complete(input, completion, outcome);
  lifecycle.turnPassed(input.conversation.id);
  if (change) input.livechat.afterRun(input.channel, input.conversation.id, change, null);
  return outcome;
}

/**
 * How a run that ran the flow moves the conversation: a handover to waiting (or
 * unavailable when nobody can take it), an ended live chat back to the bot, else not at all.
 * The live chat gets its id when an agent accepts it, not here (interface.md: the id of the
 * active or closed live chat).
 */
function modeChange(conversation: ConversationRecord, handedOver: boolean, available: boolean, at: string): ModeChange | undefined {
  const from = conversation.mode;
  const since = conversation.modeSince;
  if (handedOver) return { from, since, to: available ? "livechat_waiting" : "livechat_unavailable", at };
  return from === "bot" ? undefined : { from, since, to: "bot", at };
}

/**
 * A user's message while a human has the conversation: stored for the human side
 * (`origin: "livechat"`, `sender: "user"`) with a `pending` run that produced nothing and
 * reports the mode, then told to the provider.
 */
async function humanTurn(input: RunInput, turn: ClaimedTurn, transcript: Transcript, startedMs: number, mode: ConversationMode): Promise<RunOutcome> {
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
  await complete(
    input,
    {
      run: recordOf(input, outcome),
      conversation: input.conversation,
      ticket: input.ticket,
      claimed: true,
      messages: [],
      liveChatUserTurn: turn.userMessage.turnIndex,
      claimUntil: isoTimestamp(completedMs + input.lifecycle.leaseMs),
    },
    outcome,
  );
  input.lifecycle.turnPassed(input.conversation.id);
  input.livechat.afterRun(input.channel, input.conversation.id, undefined, { ...turn.userMessage, origin: "livechat", sender: "user" });
  return outcome;
}

/** Pulls the flow's events into the transcript, yielding the live parts, until it ends or is aborted. */
async function* runFlow(
  input: RunInput,
  turn: ClaimedTurn,
  transcript: Transcript,
): AsyncGenerator<TextPart, Omit<RunEnd, "startedAt" | "completedAt" | "durationMs">, void> {
  const { abort } = input;
  const ctx: FlowContext = new RunFlowContext(input, turn);
  let status: RunEnd["status"] = "success";
  let result: unknown = null;
  let error: string | null = null;
  // A flow that runs past its channel's limit is stopped through the run's own abort.
  const limitSeconds = input.channel.runTimeoutSeconds ?? DEFAULT_RUN_TIMEOUT_SECONDS;
  const limit = setTimeout(() => abort.abort(new RunTimedOut(limitSeconds)), limitSeconds * 1000);
  (limit as { unref?: () => void }).unref?.();
  const iterator = flowIterator(input.flow, ctx);
  // Each wait for the flow's next event also ends when the run aborts, so that a flow that
  // ignores its signal is not waited for. One listener for the whole run, rather than a race
  // against an abort promise per event, which would keep one reaction per event until the run
  // ends (memory growing with the length of a stream).
  let wake: ((value: typeof ABORTED) => void) | null = null;
  const unlisten = abort.onAbort(() => wake?.(ABORTED));
  try {
    for (;;) {
      if (abort.aborted) {
        status = "cancelled";
        break;
      }
      const step = await new Promise<IteratorResult<FlowEvent, unknown> | typeof ABORTED>((resolve, reject) => {
        wake = resolve;
        iterator.next().then(resolve, reject);
      });
      wake = null;
      if (step === ABORTED) {
        status = "cancelled";
        break;
      }
      if (step.done) {
        result = step.value ?? null;
        break;
      }
      const parts = transcript.apply(step.value);
      for (let i = 0; i < parts.length; i++) yield parts[i] as TextPart;
    }
  } catch (thrown) {
    if (abort.aborted) {
      status = "cancelled";
    } else {
      status = "error";
      error = thrown instanceof Error ? thrown.message : String(thrown);
    }
  } finally {
    wake = null;
    unlisten();
    clearTimeout(limit);
  }
  if (status === "cancelled" && abort.reason instanceof RunTimedOut) {
    // Not the client's doing: the flow failed to end in time, and the run says so.
    status = "error";
    error = abort.reason.message;
    void Promise.resolve(iterator.return?.(undefined)).catch(() => undefined);
  } else if (status === "cancelled") {
    // The flow may be suspended inside its own await; it is told through ctx.signal.
    void Promise.resolve(iterator.return?.(undefined)).catch(() => undefined);
  }
  const parts = transcript.end();
  for (let i = 0; i < parts.length; i++) yield parts[i] as TextPart;
  return { status, result, error };
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

/** A run aborted before its turn came: stored `cancelled` with its user message, its ticket given up. */
async function giveUpTurn(input: RunInput, transcript: Transcript): Promise<RunOutcome> {
  const nowMs = Date.now();
  const now = isoTimestamp(nowMs);
  const outcome = transcript.outcome(input.runId, input.conversation.id, {
    status: "cancelled",
    result: null,
    error: null,
    startedAt: now,
    completedAt: now,
    durationMs: 0,
  });
  await complete(
    input,
    {
      run: recordOf(input, outcome),
      conversation: input.conversation,
      ticket: input.ticket,
      claimed: false,
      messages: [userMessageOf(input.runId, input.payload, now, input.estimateTokens)],
      claimUntil: isoTimestamp(nowMs + input.lifecycle.leaseMs),
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

const ABORTED = Symbol("aborted");

/** How long a run may last when its channel sets no limit, in seconds. */
export const DEFAULT_RUN_TIMEOUT_SECONDS = 300;

/** Why a run that ran past its channel's limit was stopped. */
class RunTimedOut extends Error {
  constructor(seconds: number) {
    super(`The flow ran longer than the channel's limit of ${seconds} s and was stopped.`);
    this.name = "RunTimedOut";
  }
}

/** The events of a flow that has nothing to do. */
const NO_EVENTS: AsyncIterator<FlowEvent, unknown> = { next: async () => ({ done: true, value: null }) };

/** The run's user message, as stored when it claims its turn. */
function userMessageOf(runId: string, payload: string, timestamp: string, estimateTokens: TokenEstimator): NewMessage {
  return agentMessage(runId, "user", payload, timestamp, estimateTokens(payload), null, null);
}

/** The conversation's most recent messages before this run's own user message, oldest first. */
async function historyBefore(storage: Storage, turn: ClaimedTurn, limit: number): Promise<FlowHistoryMessage[]> {
  const own = turn.userMessage.turnIndex;
  if (own === 0 || limit <= 0) return [];
  const messages = await storage.listRecentMessages(turn.userMessage.conversationId, limit + 1);
  const before = messages.filter((message) => message.turnIndex < own).slice(-limit);
  return before.map(({ role, content, toolCalls, toolCallId }) => ({ role, content, toolCalls, toolCallId }));
}

/**
 * A run's FlowContext. A class rather than an object literal: V8 keeps a literal with a getter
 * as a dictionary, 1 KB of each open stream's heap (docs/benchmarks.md, "Memory per open
 * stream"). `history` is an own function, so that a flow may destructure it
 * (`run({ payload, history })`); `signal` is a getter, so that the `AbortSignal` is made
 * only when a flow reads it.
 */
class RunFlowContext implements FlowContext {
  readonly payload: string;
  readonly trigger: FlowTrigger;
  readonly language: string | null;
  readonly metadata: Record<string, unknown>;
  readonly runId: string;
  readonly conversationId: string;
  readonly isNewConversation: boolean;
  readonly channel: FlowContext["channel"];
  readonly state: unknown;
  readonly history: FlowContext["history"];
  readonly #abort: RunAbort;
  constructor(input: RunInput, turn: ClaimedTurn) {
    this.payload = input.payload;
    this.trigger = input.trigger;
    this.language = turn.conversation.language;
    this.metadata = input.metadata;
    this.runId = input.runId;
    this.conversationId = input.conversation.id;
    this.isNewConversation = input.conversation.isNew;
    this.channel = { id: input.channel.id, environment: input.channel.environment, type: input.channel.type };
    this.state = turn.conversation.flowState ?? undefined;
    this.history = (limit = input.historyLimit) => historyBefore(input.storage, turn, limit);
    this.#abort = input.abort;
  }
  get signal(): AbortSignal {
    return this.#abort.signal;
  }
}
