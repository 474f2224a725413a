import type { UIStreamEvent } from "@channelkit/core";
import { parseJsonEventStream, readUIMessageStream, type UIMessage, type UIMessageChunk, uiMessageChunkSchema } from "ai";
import { createParser } from "eventsource-parser";
import { EventSourceParserStream } from "eventsource-parser/stream";
import { expect } from "vitest";
import { execute, type RequestOptions } from "./client.js";
import type { Harness } from "./harness.js";

/** A whole SSE body: the raw text (for framing checks) and its events, in order. */
interface SseBody {
  raw: string;
  events: UIStreamEvent[];
}

/** Reads an SSE body to its end and parses every event's `data` as JSON. */
export async function readSse(response: Response): Promise<SseBody> {
  const raw = await response.text();
  const events: UIStreamEvent[] = [];
  const parser = createParser({ onEvent: (message) => events.push(JSON.parse(message.data) as UIStreamEvent) });
  parser.feed(raw);
  return { raw, events };
}

/**
 * The events of an SSE body as they arrive. Leaving the loop early cancels the body, which
 * is how a client goes away mid-stream.
 */
export async function* sseEvents(response: Response): AsyncGenerator<UIStreamEvent> {
  if (!response.body) throw new Error("The response has no body");
  const reader = response.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield JSON.parse(value.data) as UIStreamEvent;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

/** Executes with `stream: true`, checks the 200 event-stream answer and reads it whole. */
export async function runStream(h: Harness, key: string, body: Record<string, unknown>, options: RequestOptions = {}): Promise<SseBody> {
  const response = await execute(h, key, { ...body, stream: true }, options);
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
  return readSse(response);
}

/** The concatenated `delta` of every `text-delta` event. */
export function streamedText(events: UIStreamEvent[]): string {
  return events.map((event) => (event.type === "text-delta" ? event.delta : "")).join("");
}

/** The `data-run` event's ids; fails when the first event is not `data-run`. */
export function runIds(events: UIStreamEvent[]): { run_id: string; conversation_id: string } {
  const first = events[0];
  if (first?.type !== "data-run") throw new Error(`The first event is ${JSON.stringify(first)}, not data-run`);
  return first.data;
}

/** The text of a stream read by the AI SDK's own client, its chunks checked against its schema as its transport does. */
export async function readWithAiSdk(response: Response): Promise<UIMessage> {
  if (!response.body) throw new Error("no body");
  const chunks = parseJsonEventStream({ stream: response.body, schema: uiMessageChunkSchema }).pipeThrough(
    new TransformStream<{ success: true; value: UIMessageChunk } | { success: false; error: unknown }, UIMessageChunk>({
      transform(result, controller) {
        if (!result.success) throw result.error;
        controller.enqueue(result.value);
      },
    }),
  );
  let message: UIMessage | undefined;
  for await (const snapshot of readUIMessageStream<UIMessage>({ stream: chunks, terminateOnError: true })) message = snapshot;
  if (!message) throw new Error("readUIMessageStream produced no message");
  return message;
}
