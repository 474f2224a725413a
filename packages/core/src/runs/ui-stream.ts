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
 * and the driver is then drained so the `cancelled` run is still stored.
 */
export function uiMessageStream(started: StartedRun, onStorageError: (error: unknown) => void): ReplyStream & { readonly finished: boolean } {
  const run = started.steps;
  let opened = false;
  let finished = false;
  async function next(): Promise<string | null> {
    let step: IteratorResult<TextPart, RunOutcome>;
    try {
      step = await run.next();
    } catch (error) {
      onStorageError(error);
      if (finished) return null;
      finished = true;
      return sseFrame({ type: "error", errorText: "An unexpected error occurred in the service." });
    }
    if (finished) return null;
    if (step.done) {
      finished = true;
      return sseFrame(closingEvent(step.value));
    }
    return sseFrame(step.value);
  }
  return {
    /** Whether the last frame pulled was the stream's last event. */
    get finished() {
      return finished;
    },
    pull() {
      if (!opened) {
        // The run has its place in the conversation: its first event leaves with the status line.
        opened = true;
        return dataRunFrame(started.runId, started.conversationId);
      }
      return finished ? null : next();
    },
    cancel() {
      if (finished) return;
      finished = true;
      started.cancel();
      void drain(run).catch(onStorageError);
    },
  };
}

async function drain(run: RunSteps): Promise<void> {
  for (;;) if ((await run.next()).done) return;
}
