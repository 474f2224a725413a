import { EventSourceParserStream } from "eventsource-parser/stream";

/** The events of the UI message stream the widget acts on; others are skipped. */
export type ChatStreamEvent =
  | { type: "data-run"; data: { run_id: string; conversation_id: string } }
  | { type: "text-start"; id: string }
  | { type: "text-delta"; id: string; delta: string }
  | { type: "text-end"; id: string }
  | { type: "finish" }
  | { type: "error"; errorText: string };

function isChatEvent(value: unknown): value is ChatStreamEvent {
  if (typeof value !== "object" || value === null) return false;
  const event = value as Record<string, unknown>;
  switch (event.type) {
    case "data-run":
      return typeof (event.data as { conversation_id?: unknown } | null)?.conversation_id === "string";
    case "text-start":
    case "text-end":
      return typeof event.id === "string";
    case "text-delta":
      return typeof event.id === "string" && typeof event.delta === "string";
    case "finish":
    case "error":
      return true;
    default:
      return false;
  }
}

/**
 * The events of an SSE body, in order. Frames that are not JSON (`[DONE]`) and event types
 * the widget does not know are skipped, so a newer service stays readable.
 */
export async function* chatEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<ChatStreamEvent> {
  // TypeScript's DOM lib types TextDecoderStream's input as BufferSource, wider than (and so
  // not assignable from) the Uint8Array a byte stream yields, though it accepts exactly those.
  const decoder = new TextDecoderStream() as unknown as ReadableWritablePair<string, Uint8Array>;
  const reader = body.pipeThrough(decoder).pipeThrough(new EventSourceParserStream()).getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      let event: unknown;
      try {
        event = JSON.parse(value.data);
      } catch {
        continue;
      }
      if (isChatEvent(event)) yield event;
    }
  } finally {
    // Stopping early (an `error` event, an abort) must not leave the response being read.
    reader.cancel().catch(() => {});
  }
}

/** What the reader reports while a reply streams. */
export interface ReplyHandlers {
  /** The conversation the run belongs to (`data-run`), before any text. */
  conversation(conversationId: string): void;
  /** A reply starts: `id` names it in the deltas that follow. */
  start(id: string): void;
  delta(id: string, text: string): void;
}

/** How a stream ended, with the complete text of each reply, in order. */
export interface ReplyOutcome {
  /** `finished`: a `finish` event; `failed`: an `error` event; `cut`: the body ended with neither. */
  status: "finished" | "failed" | "cut";
  replies: string[];
}

/** Reads a chat stream to its end, reporting each step as it arrives. */
export async function readReply(body: ReadableStream<Uint8Array>, handlers: ReplyHandlers): Promise<ReplyOutcome> {
  const replies = new Map<string, string>();
  const outcome = (status: ReplyOutcome["status"]): ReplyOutcome => ({ status, replies: [...replies.values()] });
  for await (const event of chatEvents(body)) {
    switch (event.type) {
      case "data-run":
        handlers.conversation(event.data.conversation_id);
        break;
      case "text-start":
        replies.set(event.id, "");
        handlers.start(event.id);
        break;
      case "text-delta":
        // A delta without its start still shows: the reply is opened for it.
        if (!replies.has(event.id)) {
          replies.set(event.id, "");
          handlers.start(event.id);
        }
        replies.set(event.id, (replies.get(event.id) ?? "") + event.delta);
        handlers.delta(event.id, event.delta);
        break;
      case "finish":
        return outcome("finished");
      case "error":
        return outcome("failed");
    }
  }
  return outcome("cut");
}
