import { EventType, type RunAgentInput } from "@ag-ui/core";
import {
  type FlowEvent,
  isServiceError,
  type ReplyStream,
  type RunOutcome,
  type RunPart,
  type ServiceContext,
  type StartedRun,
  sseEvent,
  type TextPart,
} from "@channelkit/core";

/** One AG-UI event as it goes on the wire: a `data:` line of its JSON and a blank line, as the protocol's SSE encoding is. */
type Frame = string;

/**
 * A run of the channel's flow as AG-UI's event stream: `RUN_STARTED`, then as the flow yields
 * them its text as `TEXT_MESSAGE_START` / `TEXT_MESSAGE_CONTENT` / `TEXT_MESSAGE_END`, its steps
 * as `STEP_STARTED` / `STEP_FINISHED`, its tool calls as `TOOL_CALL_START` / `TOOL_CALL_ARGS`
 * (the arguments' JSON) / `TOOL_CALL_END`, their results as `TOOL_CALL_RESULT`, its `setState`
 * as `STATE_SNAPSHOT`; at the end a `STATE_SNAPSHOT` of the conversation's stored flow state
 * when it keeps one, then `RUN_FINISHED`, or `RUN_ERROR` when the flow failed. Pulled: the flow
 * advances as the client reads; the client leaving cancels the run.
 */
export class AguiEventStream implements ReplyStream {
  readonly #ctx: ServiceContext;
  readonly #run: StartedRun<RunPart>;
  readonly #input: Pick<RunAgentInput, "threadId" | "runId">;
  /** Frames made and not yet sent: one step of the run may make several. */
  readonly #queue: Frame[];
  /** Text messages started and not ended: AG-UI refuses `RUN_FINISHED` while one is open. */
  readonly #open = new Set<string>();
  /** The step started and not finished. */
  #step: string | null = null;
  /** The text message that just ended: the message a tool call right after it belongs to. */
  #justEnded: string | null = null;
  #finished = false;
  /** The step being pulled: a cancel drains the run only once it settled (its steps are taken one at a time). */
  #pulling: Promise<Frame | null> | undefined;

  constructor(ctx: ServiceContext, run: StartedRun<RunPart>, input: Pick<RunAgentInput, "threadId" | "runId">) {
    this.#ctx = ctx;
    this.#run = run;
    this.#input = input;
    // AG-UI's run id is the client's: its client matches the events to the run it asked for.
    this.#queue = [sseEvent({ type: EventType.RUN_STARTED, threadId: input.threadId, runId: input.runId })];
  }

  pull(): Frame | null | Promise<Frame | null> {
    const next = this.#queue.shift();
    if (next !== undefined) return next;
    if (this.#finished) return null;
    this.#pulling = this.#next();
    return this.#pulling;
  }

  cancel(): void {
    if (this.#finished) return;
    this.#finished = true;
    this.#queue.length = 0;
    this.#run.cancel();
    // The run is pulled to its end all the same: it is stored `cancelled` then.
    const steps = this.#run.steps;
    void Promise.resolve(this.#pulling)
      .then(async () => {
        while (!(await steps.next()).done);
      })
      .catch((error: unknown) => this.#ctx.logger.error(`channelkit agui: run ${this.#run.runId} could not be stored`, error));
  }

  /** Pulls the run until a step makes a frame (a text part may make none), or its end. */
  async #next(): Promise<Frame | null> {
    try {
      while (this.#queue.length === 0 && !this.#finished) {
        const step = await this.#run.steps.next();
        if (this.#finished) return null;
        if (step.done) await this.#end(step.value);
        else this.#part(step.value);
      }
    } catch (error) {
      // Refused (it waited too long for its turn) or not stored: the run ends in error.
      if (!isServiceError(error)) this.#ctx.logger.error(`channelkit agui: run ${this.#run.runId} could not be stored`, error);
      if (this.#finished) return null;
      this.#closeText();
      this.#finishStep();
      this.#push({
        type: EventType.RUN_ERROR,
        message: isServiceError(error) ? error.message : "An unexpected error occurred in the service.",
        code: isServiceError(error) ? error.code : "internal_error",
      });
      this.#finished = true;
    }
    return this.#queue.shift() ?? null;
  }

  #part(part: RunPart): void {
    if (part.type === "flow-event") {
      this.#flowEvent(part.event);
      this.#justEnded = null;
      return;
    }
    this.#justEnded = part.type === "text-end" ? part.id : null;
    const event = textEvent(part);
    if (event === null) return;
    if (event.type === EventType.TEXT_MESSAGE_START) this.#open.add(part.id);
    if (event.type === EventType.TEXT_MESSAGE_END) this.#open.delete(part.id);
    this.#push(event);
  }

  /** What the flow yielded beyond its text: its text parts came before (a step or a tool call closes the text). */
  #flowEvent(event: FlowEvent): void {
    switch (event.type) {
      case "step":
        this.#finishStep();
        this.#step = event.name;
        this.#push({ type: EventType.STEP_STARTED, stepName: event.name });
        return;
      case "message":
        if (event.role === "tool") {
          if (event.toolCallId !== undefined) {
            this.#push({
              type: EventType.TOOL_CALL_RESULT,
              messageId: crypto.randomUUID(),
              toolCallId: event.toolCallId,
              content: event.content,
              role: "tool",
            });
          }
          return;
        }
        for (const call of event.toolCalls ?? []) {
          const parent = this.#justEnded === null ? {} : { parentMessageId: this.#justEnded };
          this.#push({ type: EventType.TOOL_CALL_START, toolCallId: call.id, toolCallName: call.name, ...parent });
          this.#push({ type: EventType.TOOL_CALL_ARGS, toolCallId: call.id, delta: JSON.stringify(call.arguments ?? {}) });
          this.#push({ type: EventType.TOOL_CALL_END, toolCallId: call.id });
        }
        return;
      case "state":
        // A state the flow cleared (undefined) has no snapshot: AG-UI's is a value.
        if (event.state !== undefined) this.#push({ type: EventType.STATE_SNAPSHOT, snapshot: event.state });
        return;
      default:
        return;
    }
  }

  #finishStep(): void {
    if (this.#step === null) return;
    this.#push({ type: EventType.STEP_FINISHED, stepName: this.#step });
    this.#step = null;
  }

  async #end(outcome: RunOutcome): Promise<void> {
    this.#closeText();
    this.#finishStep();
    if (outcome.status === "error") {
      this.#push({ type: EventType.RUN_ERROR, message: outcome.error ?? "The flow failed.", code: "flow_error" });
    } else {
      const state = await this.#flowState(outcome.conversationId);
      if (state !== undefined) this.#push({ type: EventType.STATE_SNAPSHOT, snapshot: state });
      this.#push({
        type: EventType.RUN_FINISHED,
        threadId: this.#input.threadId,
        runId: this.#input.runId,
        // AG-UI refuses a null result: a flow that returned nothing has none.
        ...(outcome.result === null || outcome.result === undefined ? {} : { result: outcome.result }),
        ...(outcome.status === "cancelled" ? { outcome: { type: "cancelled" } } : {}),
      });
    }
    this.#finished = true;
  }

  /**
   * The conversation's flow state (`setState`) as stored after the run: the run's outcome does
   * not carry it. Undefined when the flow keeps none.
   */
  async #flowState(conversationId: string): Promise<unknown> {
    const conversation = await this.#ctx.storage.findConversation(conversationId);
    const state = conversation?.flowState;
    return state === null ? undefined : state;
  }

  /** Ends the text messages still open: a run that failed, or was stopped, mid-message. */
  #closeText(): void {
    for (const messageId of this.#open) this.#push({ type: EventType.TEXT_MESSAGE_END, messageId });
    this.#open.clear();
  }

  #push(event: { type: EventType } & Record<string, unknown>): void {
    this.#queue.push(sseEvent(event));
  }
}

/** The AG-UI event of one of the run's text parts; null for an empty delta (AG-UI has no use for it). */
function textEvent(part: TextPart) {
  switch (part.type) {
    case "text-start":
      return { type: EventType.TEXT_MESSAGE_START, messageId: part.id, role: "assistant" } as const;
    case "text-delta":
      return part.delta === "" ? null : ({ type: EventType.TEXT_MESSAGE_CONTENT, messageId: part.id, delta: part.delta } as const);
    case "text-end":
      return { type: EventType.TEXT_MESSAGE_END, messageId: part.id } as const;
  }
}
