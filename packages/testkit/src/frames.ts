import type { UIStreamEvent } from "@channelkit/core";
import { expect } from "vitest";
import { streamedText } from "./sse.js";

/** One SSE frame exactly: a `data:` line holding JSON, then a blank line. */
const FRAME = /^data: \{[^\n]*\}\n\n$/;

/**
 * An SSE body read frame by frame, keeping the exact bytes of every whole frame read so far:
 * a client that reads part of a stream, then goes away or reads on.
 */
export class SseFrames {
  /** The whole frames read so far, byte for byte. */
  raw = "";
  readonly events: UIStreamEvent[] = [];
  #buffer = "";
  readonly #reader: ReadableStreamDefaultReader<string>;

  constructor(response: Response) {
    if (!response.body) throw new Error("The response has no body");
    this.#reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  }

  /** The next event, or null at the end of the body. */
  async next(): Promise<UIStreamEvent | null> {
    for (;;) {
      const end = this.#buffer.indexOf("\n\n");
      if (end >= 0) {
        const frame = this.#buffer.slice(0, end + 2);
        this.#buffer = this.#buffer.slice(end + 2);
        expect(frame).toMatch(FRAME);
        this.raw += frame;
        const event = JSON.parse(frame.slice("data: ".length)) as UIStreamEvent;
        this.events.push(event);
        return event;
      }
      const { done, value } = await this.#reader.read();
      if (done) {
        expect(this.#buffer, "a partial frame at the end of the stream").toBe("");
        return null;
      }
      this.#buffer += value;
    }
  }

  /** Reads until `count` text deltas were seen in all; fails if the stream ends first. */
  async deltas(count: number): Promise<void> {
    while (this.events.filter((event) => event.type === "text-delta").length < count) {
      const event = await this.next();
      if (event === null || event.type === "finish" || event.type === "error") {
        throw new Error(`the stream ended (${event?.type ?? "closed"}) before ${count} text deltas: ${this.raw}`);
      }
    }
  }

  /** Reads to the end of the body. */
  async rest(): Promise<void> {
    while ((await this.next()) !== null);
  }

  text(): string {
    return streamedText(this.events);
  }
}
