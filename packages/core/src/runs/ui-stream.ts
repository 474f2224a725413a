import type { Logger } from "../context.js";
import { isServiceError } from "../http/errors.js";
import type { ReplyStream } from "../http/reply.js";
import type { ConversationMode, RunStatus } from "../storage/types.js";
import type { RunOutcome } from "./outcome.js";
import type { RunSteps, TextPart } from "./driver.js";
import type { StartedRun } from "./start.js";

/** Headers of the streamed execute response; the last one lets the AI SDK's client read it. */
export const UI_STREAM_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache, no-transform",
  connection: "keep-alive",
  "x-accel-buffering": "no",
  "x-vercel-ai-ui-message-stream": "v1",
} as const;

/**
 * What the `finish` event says of the run it ends, in the protocol's own place for it (the
 * AI SDK's `messageMetadata`, which its client merges into the message's `metadata`): the
 * run's `status` as the JSON answer's, so a streaming client tells a run that paused
 * (`pending`) or was cancelled from one that completed, and `livechat_mode` as the JSON
 * answer's `output.metadata.livechat_mode` (`livechat_waiting` when the run handed over, the
 * current mode when a human has the conversation, else null).
 */
export interface FinishMetadata {
  /** `success`, `pending` or `cancelled` (a run that failed ends with `error`, not `finish`). */
  status: Exclude<RunStatus, "error">;
  livechat_mode: ConversationMode | null;
}

/** The events of the UI message stream protocol that the contract uses. */
export type UIStreamEvent =
  | { type: "data-run"; data: { run_id: string; conversation_id: string } }
  | TextPart
  | { type: "finish"; finishReason: "stop"; messageMetadata: FinishMetadata }
  | { type: "error"; errorText: string };

/** One SSE frame: a `data:` line and a blank line. */
function sseFrame(event: UIStreamEvent): string {
  return `data: ${JSON.stringify(event)}\n\n`;
}

/** The stream's first frame, `data-run`: made from the run's ids, so a recorded stream need not store it. */
export function dataRunFrame(runId: string, conversationId: string): string {
  return sseFrame({ type: "data-run", data: { run_id: runId, conversation_id: conversationId } });
}

/** The stream's last frame for an outcome (see {@link closingEvent}). */
export function closingFrame(outcome: RunOutcome): string {
  return sseFrame(closingEvent(outcome));
}

/**
 * The stream's last event: `error` for a flow error, else `finish`, whose `messageMetadata`
 * says how the run ended (see {@link FinishMetadata}): completed, paused or handed over
 * (`pending`), or cancelled.
 */
function closingEvent(outcome: RunOutcome): UIStreamEvent {
  if (outcome.status === "error") return { type: "error", errorText: outcome.error ?? "The flow failed." };
  return { type: "finish", finishReason: "stop", messageMetadata: { status: outcome.status, livechat_mode: outcome.livechatMode } };
}

/**
 * Streams a run as SSE. The stream is pulled: the flow advances only as fast as the client
 * reads, which is the back-pressure. Cancelling the stream (client gone) aborts the run,
 * and the driver is then drained so the `cancelled` run is still stored. A failure to store
 * the run is logged, and the stream ends with an `error` event.
 */
export function uiMessageStream(started: StartedRun, logger: Pick<Logger, "error">): ReplyStream & { readonly finished: boolean } {
  return new UiMessageStream(started, logger);
}

/**
 * The stream of {@link uiMessageStream}. A class rather than an object literal, whose getter
 * would make V8 keep it as a dictionary, and a step waited for with one `then` rather than
 * an async function suspended in it: each is a few hundred bytes for as long as a stream is
 * open (docs/benchmarks.md, "Memory per open stream").
 */
class UiMessageStream implements ReplyStream {
  readonly #started: StartedRun;
  readonly #logger: Pick<Logger, "error">;
  #opened = false;
  #finished = false;
  /** The last step pulled: a cancel drains the run only once it settled (the run's steps are taken one at a time). */
  #pulling: Promise<string | null> | undefined;

  constructor(started: StartedRun, logger: Pick<Logger, "error">) {
    this.#started = started;
    this.#logger = logger;
  }

  /** Whether the last frame pulled was the stream's last event. */
  get finished(): boolean {
    return this.#finished;
  }

  pull(): string | null | Promise<string | null> {
    if (!this.#opened) {
      // The run has its place in the conversation: its first event leaves with the status line.
      this.#opened = true;
      return dataRunFrame(this.#started.runId, this.#started.conversationId);
    }
    if (this.#finished) return null;
    this.#pulling = this.#started.steps.next().then(
      (step) => this.#frame(step),
      (error: unknown) => this.#failed(error),
    );
    return this.#pulling;
  }

  cancel(): void {
    if (this.#finished) return;
    this.#finished = true;
    this.#started.cancel();
    // A client that leaves while a step is pulled (the Node adapter's case) must not start a
    // second one beside it: two steps at once would store the run twice.
    const steps = this.#started.steps;
    void Promise.resolve(this.#pulling)
      .then(() => drain(steps))
      .catch((error: unknown) => this.#storageError(error));
  }

  /** The frame of the run's next step. */
  #frame(step: IteratorResult<TextPart, RunOutcome>): string | null {
    if (this.#finished) return null;
    if (!step.done) return sseFrame(step.value);
    this.#finished = true;
    return sseFrame(closingEvent(step.value));
  }

  /**
   * The run could not be stored, or was refused (it waited too long for its turn): the
   * stream ends with an `error` event, which says why for a refusal.
   */
  #failed(error: unknown): string | null {
    if (!isServiceError(error)) this.#storageError(error);
    if (this.#finished) return null;
    this.#finished = true;
    return sseFrame({ type: "error", errorText: isServiceError(error) ? error.message : "An unexpected error occurred in the service." });
  }

  #storageError(error: unknown): void {
    this.#logger.error(`channelkit: run ${this.#started.runId} could not be stored`, error);
  }
}

async function drain(run: RunSteps): Promise<void> {
  for (;;) if ((await run.next()).done) return;
}
