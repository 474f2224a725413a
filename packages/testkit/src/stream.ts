import { describe, expect, it } from "vitest";
import { execute, expectError, readHistory, unknownKey, UUID, storedRun } from "./client.js";
import type { Harness } from "./harness.js";
import { readWithAiSdk, runIds, runStream, streamedText } from "./sse.js";

const PAYLOAD = "hello streaming world";

/** One SSE frame exactly: a `data:` line holding JSON, then a blank line. */
const FRAMES = /^(data: \{[^\n]*\}\n\n)+$/;

/** The streamed execute response (UI message stream protocol). */
export function streamTests(h: Harness): void {
  describe("execute, SSE response", () => {
    it("answers 200 with exactly the event-stream headers", async () => {
      const channel = await h.channel({ flow: "echo" });
      const response = await execute(h, channel.key, { payload: PAYLOAD, stream: true });
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
      expect(response.headers.get("cache-control")).toBe("no-cache, no-transform");
      expect(response.headers.get("x-accel-buffering")).toBe("no");
      expect(response.headers.get("x-vercel-ai-ui-message-stream")).toBe("v1");
      await response.body?.cancel();
    });

    it("frames every event as one `data: <json>` line and a blank line, with no [DONE]", async () => {
      const channel = await h.channel({ flow: "echo" });
      const { raw, events } = await runStream(h, channel.key, { payload: PAYLOAD });
      expect(raw).toMatch(FRAMES);
      expect(raw).not.toContain("[DONE]");
      const frames = raw.split("\n\n").filter((frame) => frame !== "");
      expect(frames.map((frame) => JSON.parse(frame.slice("data: ".length)))).toEqual(events);
    });

    it("sends data-run, text-start, text-delta+, text-end, finish, with one text id", async () => {
      const channel = await h.channel({ flow: "echo" });
      const { events } = await runStream(h, channel.key, { payload: PAYLOAD });
      const types = events.map((event) => event.type);
      expect(types[0]).toBe("data-run");
      expect(types[1]).toBe("text-start");
      expect(types.slice(2, -2).every((type) => type === "text-delta")).toBe(true);
      expect(types.length - 4).toBeGreaterThan(1);
      expect(types.slice(-2)).toEqual(["text-end", "finish"]);
      expect(events.at(-1)).toEqual({ type: "finish", finishReason: "stop", messageMetadata: { status: "success", livechat_mode: null } });
      const ids = new Set(events.flatMap((event) => ("id" in event ? [event.id] : [])));
      expect(ids.size).toBe(1);
      expect([...ids][0]).toEqual(expect.any(String));
      expect(streamedText(events)).toBe(`Echo: ${PAYLOAD}`);
    });

    it("data-run carries the ids that history and storage know", async () => {
      const channel = await h.channel({ flow: "echo" });
      const { events } = await runStream(h, channel.key, { payload: PAYLOAD });
      const ids = runIds(events);
      expect(ids.run_id).toMatch(UUID);
      expect(ids.conversation_id).toMatch(UUID);
      const history = await readHistory(h, channel.key, ids.conversation_id);
      expect(history.session_id).toBe(ids.conversation_id);
      expect(history.messages.map((message) => [message.role, message.content, message.run_id])).toEqual([
        ["user", PAYLOAD, ids.run_id],
        ["assistant", `Echo: ${PAYLOAD}`, ids.run_id],
      ]);
      expect(await storedRun(h.target.storage, ids.run_id)).toMatchObject({ conversationId: ids.conversation_id, status: "success" });
    });

    it("a resumed conversation streams with its conversation_id", async () => {
      const channel = await h.channel({ flow: "echo" });
      const first = runIds((await runStream(h, channel.key, { payload: "one" })).events);
      const second = await runStream(h, channel.key, { payload: "two", conversation_id: first.conversation_id });
      expect(runIds(second.events).conversation_id).toBe(first.conversation_id);
      expect(runIds(second.events).run_id).not.toBe(first.run_id);
      expect(streamedText(second.events)).toBe("Echo: two");
    });

    it("an error before the first byte is a normal JSON error, not a stream", async () => {
      const channel = await h.channel({ flow: "echo", defaultStream: true });
      await expectError(await execute(h, channel.key, { payload: "x", conversation_id: crypto.randomUUID() }), 404, "conversation_not_found");
      await expectError(await execute(h, unknownKey(), { payload: "x", stream: true }), 401, "invalid_api_key");
    });

    it("is read unchanged by the AI SDK's own client (readUIMessageStream)", async () => {
      const channel = await h.channel({ flow: "echo" });
      const response = await execute(h, channel.key, { payload: PAYLOAD, stream: true });
      expect(response.status).toBe(200);
      // The SDK's transport validates each chunk against its own schema, as done here.
      const message = await readWithAiSdk(response);

      expect(message.role).toBe("assistant");
      const text = message.parts.filter((part) => part.type === "text");
      expect(text).toEqual([expect.objectContaining({ type: "text", text: `Echo: ${PAYLOAD}`, state: "done" })]);
      const data = message.parts.filter((part) => part.type === "data-run");
      expect(data).toHaveLength(1);
      const ids = (data[0] as { data: { run_id: string; conversation_id: string } }).data;
      expect(ids.run_id).toMatch(UUID);
      const history = await readHistory(h, channel.key, ids.conversation_id);
      expect(history.messages[0]?.run_id).toBe(ids.run_id);
    });
  });
}
