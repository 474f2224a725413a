import { describe, expect, it } from "vitest";
import { chatEvents, readReply } from "./stream.js";

const RUN = { run_id: "r1", conversation_id: "0b8e3c1e-6a52-4a8e-9f43-5d2f0c7e9a11" };

function frames(events: unknown[]): string {
  return events.map((event) => `data: ${typeof event === "string" ? event : JSON.stringify(event)}\n\n`).join("");
}

/** A byte stream of `text`, cut into pieces of `size` bytes: frames and UTF-8 characters split anywhere. */
function bytes(text: string, size = 7): ReadableStream<Uint8Array> {
  const all = new TextEncoder().encode(text);
  let offset = 0;
  return new ReadableStream({
    pull(controller) {
      if (offset >= all.length) return controller.close();
      controller.enqueue(all.slice(offset, offset + size));
      offset += size;
    },
  });
}

/** Runs readReply, recording what it reports. */
async function read(body: ReadableStream<Uint8Array>) {
  const seen: string[] = [];
  const outcome = await readReply(body, {
    conversation: (id) => seen.push(`conversation ${id}`),
    start: (id) => seen.push(`start ${id}`),
    delta: (id, text) => seen.push(`delta ${id} ${text}`),
  });
  return { outcome, seen };
}

describe("readReply", () => {
  it("reports the conversation, then each reply's deltas as they arrive, and the complete replies", async () => {
    const stream = frames([
      { type: "data-run", data: RUN },
      { type: "text-start", id: "t1" },
      { type: "text-delta", id: "t1", delta: "Écho : " },
      { type: "text-delta", id: "t1", delta: "héllo 👋" },
      { type: "text-end", id: "t1" },
      { type: "text-start", id: "t2" },
      { type: "text-delta", id: "t2", delta: "Second" },
      { type: "text-end", id: "t2" },
      { type: "finish", finishReason: "stop" },
    ]);
    for (const size of [1, 3, 7, 64, 4096]) {
      const { outcome, seen } = await read(bytes(stream, size));
      expect(outcome).toEqual({ status: "finished", replies: ["Écho : héllo 👋", "Second"] });
      expect(seen).toEqual([`conversation ${RUN.conversation_id}`, "start t1", "delta t1 Écho : ", "delta t1 héllo 👋", "start t2", "delta t2 Second"]);
    }
  });

  it("delivers a delta before the stream ends: the reply shows token by token", async () => {
    let push: (text: string) => void = () => {};
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        push = (text) => controller.enqueue(new TextEncoder().encode(text));
      },
    });
    const deltas: string[] = [];
    let gotDelta: () => void = () => {};
    const firstDelta = new Promise<void>((resolve) => {
      gotDelta = resolve;
    });
    const reading = readReply(body, {
      conversation() {},
      start() {},
      delta(_id, text) {
        deltas.push(text);
        gotDelta();
      },
    });
    push(
      frames([
        { type: "data-run", data: RUN },
        { type: "text-start", id: "t" },
        { type: "text-delta", id: "t", delta: "Hel" },
      ]),
    );
    await firstDelta;
    expect(deltas).toEqual(["Hel"]);
    push(
      frames([
        { type: "text-delta", id: "t", delta: "lo" },
        { type: "text-end", id: "t" },
        { type: "finish", finishReason: "stop" },
      ]),
    );
    expect(await reading).toEqual({ status: "finished", replies: ["Hello"] });
  });

  it("a run with no reply: data-run then finish", async () => {
    const { outcome } = await read(
      bytes(
        frames([
          { type: "data-run", data: RUN },
          { type: "finish", finishReason: "stop" },
        ]),
      ),
    );
    expect(outcome).toEqual({ status: "finished", replies: [] });
  });

  it("fails on an error event, keeping what streamed before it", async () => {
    const stream = frames([
      { type: "data-run", data: RUN },
      { type: "text-start", id: "t" },
      { type: "text-delta", id: "t", delta: "Working on it" },
      { type: "error", errorText: "flow failed on purpose" },
    ]);
    const { outcome } = await read(bytes(stream));
    expect(outcome).toEqual({ status: "failed", replies: ["Working on it"] });
  });

  it("is cut when the body ends with neither finish nor error (the connection dropped)", async () => {
    const stream = frames([
      { type: "data-run", data: RUN },
      { type: "text-start", id: "t" },
      { type: "text-delta", id: "t", delta: "Hal" },
    ]);
    const { outcome } = await read(bytes(`${stream}data: {"type":"text-del`));
    expect(outcome).toEqual({ status: "cut", replies: ["Hal"] });
  });

  it("skips what it does not know: comments, [DONE], other event types, malformed JSON", async () => {
    const stream = `: keep-alive\n\n${frames([
      { type: "start" },
      { type: "data-run", data: RUN },
      "{not json",
      { type: "data-suggestions", data: ["x"] },
      { type: "text-delta", id: "t", delta: "no start, still shown" },
      { type: "finish", finishReason: "stop" },
      "[DONE]",
    ])}`;
    const { outcome, seen } = await read(bytes(stream));
    expect(outcome).toEqual({ status: "finished", replies: ["no start, still shown"] });
    expect(seen).toEqual([`conversation ${RUN.conversation_id}`, "start t", "delta t no start, still shown"]);
  });

  it("cancels the body when reading stops early", async () => {
    let cancelled = false;
    const encoded = new TextEncoder().encode(
      frames([
        { type: "error", errorText: "x" },
        { type: "text-start", id: "late" },
      ]),
    );
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(encoded);
      },
      cancel() {
        cancelled = true;
      },
    });
    const events = [];
    for await (const event of chatEvents(body)) {
      events.push(event);
      break;
    }
    expect(events).toEqual([{ type: "error", errorText: "x" }]);
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(cancelled).toBe(true);
  });
});
