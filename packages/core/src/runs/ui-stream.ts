import { utf8 } from "../auth/encoding.js";
import type { RunOutcome } from "./outcome.js";
import type { TextPart } from "./driver.js";

/** Headers of the streamed execute response; the last one lets the AI SDK's client read it. */
export const UI_STREAM_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache, no-transform",
  connection: "keep-alive",
  "x-accel-buffering": "no",
  "x-vercel-ai-ui-message-stream": "v1",
} as const;

/** The events of the UI message stream protocol that the contract uses. */
export type UIStreamEvent =
  | { type: "data-run"; data: { run_id: string; conversation_id: string } }
  | TextPart
  | { type: "finish"; finishReason: "stop" }
  | { type: "error"; errorText: string };

/** One SSE frame: a `data:` line and a blank line. */
export function sseFrame(event: UIStreamEvent): Uint8Array {
  return utf8(`data: ${JSON.stringify(event)}\n\n`);
}

/**
 * The stream's last event: `finish` for a run that completed (also when the flow paused),
 * `error` for a flow error.
 */
export function closingEvent(outcome: RunOutcome): UIStreamEvent {
  if (outcome.status === "error") return { type: "error", errorText: outcome.error ?? "The flow failed." };
  return { type: "finish", finishReason: "stop" };
}

/**
 * Streams a run as SSE. The stream is pulled: the flow advances only as fast as the client
 * reads, which is the back-pressure. Cancelling the stream (client gone) aborts the run,
 * and the driver is then drained so the `cancelled` run is still stored.
 */
export function uiMessageStream(
  runId: string,
  conversationId: string,
  run: AsyncGenerator<TextPart, RunOutcome, void>,
  abort: () => void,
  onStorageError: (error: unknown) => void,
): ReadableStream<Uint8Array> {
  let finished = false;
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        controller.enqueue(sseFrame({ type: "data-run", data: { run_id: runId, conversation_id: conversationId } }));
      },
      async pull(controller) {
        if (finished) return;
        let next: IteratorResult<TextPart, RunOutcome>;
        try {
          next = await run.next();
        } catch (error) {
          finished = true;
          onStorageError(error);
          safely(() => {
            controller.enqueue(sseFrame({ type: "error", errorText: "An unexpected error occurred in the service." }));
            controller.close();
          });
          return;
        }
        if (next.done) {
          finished = true;
          safely(() => {
            controller.enqueue(sseFrame(closingEvent(next.value)));
            controller.close();
          });
          return;
        }
        safely(() => controller.enqueue(sseFrame(next.value)));
      },
      cancel() {
        if (finished) return;
        finished = true;
        abort();
        void drain(run).catch(onStorageError);
      },
    },
    { highWaterMark: 0 },
  );
}

async function drain(run: AsyncGenerator<TextPart, RunOutcome, void>): Promise<void> {
  for (;;) if ((await run.next()).done) return;
}

/** Enqueueing on a stream the client already cancelled throws; that is expected. */
function safely(action: () => void): void {
  try {
    action();
  } catch {
    // The stream was cancelled between the read and the write.
  }
}
