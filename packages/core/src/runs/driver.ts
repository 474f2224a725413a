import type { TokenEstimator } from "../conversations/tokens.js";
import type { Flow, FlowContext, FlowHistoryMessage } from "../flows/define.js";
import type { FlowEvent } from "../flows/events.js";
import type { ChannelRecord, ConversationMode, NewMessage, Storage } from "../storage/types.js";
import type { RunAbort } from "./abort.js";
import type { RunOutcome } from "./outcome.js";
import { isoNow, isoTimestamp } from "./timestamp.js";

/** A part of the live reply, in the UI message stream's own shapes. */
export type TextPart =
  | { type: "text-start"; id: string }
  | { type: "text-delta"; id: string; delta: string }
  | { type: "text-end"; id: string };

/** A run pulled one step at a time: its live text parts, then its outcome. */
export interface RunSteps {
  next(): Promise<IteratorResult<TextPart, RunOutcome>>;
}

/** Everything one run needs; the driver owns nothing else. */
export interface RunInput {
  flow: Flow;
  channel: ChannelRecord;
  runId: string;
  conversationId: string;
  /** The stored conversation when resuming, null when this run starts it. */
  existing: { flowState: unknown } | null;
  payload: string;
  metadata: Record<string, unknown>;
  /** Stops the run: it is then stored `cancelled`, with what was produced so far. */
  abort: RunAbort;
  storage: Storage;
  estimateTokens: TokenEstimator;
  historyLimit: number;
  /**
   * Whether the caller streams the live text. When false (a JSON answer) the driver yields
   * nothing and the first `next()` returns the outcome: the parts would only be discarded.
   */
  live: boolean;
}

interface OpenText {
  id: string;
  content: string;
}

/**
 * Drives a flow: yields its text as stream parts while it runs, then stores the run with
 * the user's message and every produced message in one transaction, and returns the
 * outcome. A flow that throws is an `error` outcome; an aborted signal is `cancelled`,
 * stored with what was produced so far. Only a storage failure makes this throw.
 */
export async function* driveRun(input: RunInput): AsyncGenerator<TextPart, RunOutcome, void> {
  const startedMs = Date.now();
  const startedAt = isoTimestamp(startedMs);
  const { flow, abort, estimateTokens, live } = input;
  const userMessage = agentMessage(input, "user", input.payload, startedAt, null, null);

  const produced: NewMessage[] = [];
  const executionOrder: string[] = [];
  let stepId: string | null = null;
  let nodeType: string | null = null;
  let open: OpenText | null = null;
  let paused = false;
  let livechatMode: ConversationMode | null = null;
  let flowState: { value: unknown } | null = null;
  let status: RunOutcome["status"] = "success";
  let result: unknown = null;
  let error: string | null = null;

  // Called only with a text open: a generator's creation is not free on the hot path.
  function* closeText(): Generator<TextPart> {
    if (!open) return;
    produced.push(agentMessage(input, "assistant", open.content, isoNow(), stepId, nodeType));
    if (live) yield { type: "text-end", id: open.id };
    open = null;
  }

  function* wholeText(content: string): Generator<TextPart> {
    if (open) yield* closeText();
    const id = crypto.randomUUID();
    if (live) {
      yield { type: "text-start", id };
      if (content !== "") yield { type: "text-delta", id, delta: content };
    }
    open = { id, content };
    yield* closeText();
  }

  const ctx: FlowContext = {
    payload: input.payload,
    metadata: input.metadata,
    runId: input.runId,
    conversationId: input.conversationId,
    isNewConversation: input.existing === null,
    channel: { id: input.channel.id, environment: input.channel.environment },
    state: input.existing?.flowState ?? undefined,
    history: (limit = input.historyLimit) => loadHistory(input, limit),
    get signal() {
      return abort.signal;
    },
  };

  const iterator = flow.run(ctx)[Symbol.asyncIterator]();
  // Each wait for the flow's next event also ends when the signal aborts, so that a flow that
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
      const event: FlowEvent = step.value;
      switch (event.type) {
        case "step":
          if (open) yield* closeText();
          stepId = crypto.randomUUID();
          nodeType = event.nodeType;
          executionOrder.push(event.name);
          break;
        case "text-delta":
          if (event.delta === "") break;
          if (!open) {
            open = { id: crypto.randomUUID(), content: "" };
            if (live) yield { type: "text-start", id: open.id };
          }
          open.content += event.delta;
          if (live) yield { type: "text-delta", id: open.id, delta: event.delta };
          break;
        case "message":
          if (event.role === "assistant") {
            yield* wholeText(event.content);
            const last = produced[produced.length - 1] as NewMessage;
            if (event.toolCalls) last.toolCalls = event.toolCalls;
          } else {
            if (open) yield* closeText();
            const tool = agentMessage(input, "tool", event.content, isoNow(), stepId, nodeType);
            tool.toolCallId = event.toolCallId ?? null;
            tool.toolCalls = event.toolCalls ?? null;
            produced.push(tool);
          }
          break;
        case "pause":
          paused = true;
          yield* wholeText(event.question);
          break;
        case "handover":
          paused = true;
          livechatMode = "livechat_waiting";
          if (event.message !== undefined) yield* wholeText(event.message);
          break;
        case "state":
          flowState = { value: event.state };
          break;
      }
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
  }
  if (status === "cancelled") {
    // The flow may be suspended inside its own await; it is told through ctx.signal.
    void Promise.resolve(iterator.return?.(undefined)).catch(() => undefined);
  }
  if (open) {
    const text = open as OpenText;
    produced.push(agentMessage(input, "assistant", text.content, isoNow(), stepId, nodeType));
    if (status !== "cancelled" && live) yield { type: "text-end", id: text.id };
    open = null;
  }
  if (status === "success" && paused) status = "pending";

  const completedMs = Date.now();
  const completedAt = isoTimestamp(completedMs);
  const outcome: RunOutcome = {
    runId: input.runId,
    conversationId: input.conversationId,
    status,
    result: status === "error" ? null : result,
    error,
    produced,
    executionOrder,
    startedAt,
    completedAt,
    durationMs: completedMs - startedMs,
    livechatMode: status === "pending" ? livechatMode : null,
  };

  await input.storage.completeRun({
    run: {
      id: input.runId,
      conversationId: input.conversationId,
      channelId: input.channel.id,
      tenantId: input.channel.tenantId,
      status,
      flowName: flow.name,
      flowVersion: flow.version ?? null,
      result: outcome.result,
      error,
      executionOrder,
      startedAt,
      completedAt,
      durationMs: outcome.durationMs,
    },
    conversation: { id: input.conversationId, tenantId: input.channel.tenantId, channelId: input.channel.id, isNew: input.existing === null },
    messages: [userMessage, ...produced],
    ...(flowState ? { flowState: flowState.value } : {}),
    ...(outcome.livechatMode ? { mode: outcome.livechatMode } : {}),
  });
  return outcome;

  function agentMessage(
    run: RunInput,
    role: NewMessage["role"],
    content: string,
    timestamp: string,
    step: string | null,
    node: string | null,
  ): NewMessage {
    return {
      origin: "agent",
      role,
      content,
      timestamp,
      tokenCount: estimateTokens(content),
      runId: run.runId,
      stepId: step,
      nodeType: node,
      toolCalls: null,
      toolCallId: null,
      livechatMessageId: null,
      sender: null,
    };
  }
}

const ABORTED = Symbol("aborted");

async function loadHistory(input: RunInput, limit: number): Promise<FlowHistoryMessage[]> {
  if (input.existing === null) return [];
  const messages = await input.storage.listRecentMessages(input.conversationId, limit);
  return messages.map(({ role, content, toolCalls, toolCallId }) => ({ role, content, toolCalls, toolCallId }));
}
