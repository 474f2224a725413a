import { describe, expect, it } from "vitest";
import { execute, readHistory, runJson, storedRun, waitFor } from "./client.js";
import type { Harness } from "./harness.js";
import { sseEvents } from "./sse.js";

/** A `slow` run streamed until `until` is seen; the stream stays open until `close()`. */
async function openStream(h: Harness, key: string, body: Record<string, unknown>, until: "data-run" | "text-delta") {
  const controller = new AbortController();
  const response = await execute(h, key, { ...body, stream: true }, { signal: controller.signal });
  expect(response.status).toBe(200);
  const events = sseEvents(response);
  let ids: { run_id: string; conversation_id: string } | undefined;
  let delta: string | undefined;
  // Read with next() rather than for-await, whose break would cancel the body, and so the run.
  for (let step = await events.next(); !step.done; step = await events.next()) {
    const event = step.value;
    if (event.type === "data-run") ids = event.data;
    if (event.type === "text-delta") delta = event.delta;
    if (event.type === "finish" || event.type === "error") throw new Error(`the run ended (${event.type}) too early`);
    if (until === "data-run" ? ids : delta !== undefined) break;
  }
  if (!ids) throw new Error("no data-run event");
  return { runId: ids.run_id, conversationId: ids.conversation_id, delta, close: () => controller.abort() };
}

/** decisions.md, "Runs and conversations": a conversation exists from its first event; runs of it take turns. */
export function turnTests(h: Harness): void {
  describe("runs and conversations", () => {
    it("a new conversation exists from its first event: history shows the run's user message while it streams", async () => {
      const channel = await h.channel({ flow: "slow" });
      const first = await openStream(h, channel.key, { payload: "first" }, "data-run");
      try {
        const during = await readHistory(h, channel.key, first.conversationId);
        expect(during.session_id).toBe(first.conversationId);
        expect(during.mode).toBe("bot");
        expect(during.messages.map((m) => [m.turn_index, m.role, m.content, m.run_id])).toEqual([[0, "user", "first", first.runId]]);
      } finally {
        first.close();
      }
      expect(await storedRun(h.target.storage, first.runId)).toMatchObject({ status: "cancelled" });
    });

    it("an execute resuming a conversation whose first run is still streaming is accepted and waits its turn", async () => {
      const channel = await h.channel({ flow: "slow" });
      const first = await openStream(h, channel.key, { payload: "first" }, "text-delta");
      // A second run, on the conversation the first is still writing: accepted, it waits.
      const waiting = new AbortController();
      const second = execute(h, channel.key, { payload: "second", conversation_id: first.conversationId, stream: false }, { signal: waiting.signal });
      second.catch(() => undefined);
      const settled = await Promise.race([second.then(() => "answered"), new Promise((resolve) => setTimeout(() => resolve("waiting"), 400))]);
      expect(settled).toBe("waiting");
      // A run that waits has not started: history shows only the first run's user message.
      expect((await readHistory(h, channel.key, first.conversationId)).messages.map((m) => m.content)).toEqual(["first"]);

      // Gone while it waits: the first run goes on, and the second keeps its place in the queue.
      waiting.abort();
      await expect(second).rejects.toThrow();
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect((await readHistory(h, channel.key, first.conversationId)).messages.map((m) => m.content)).toEqual(["first"]);
      first.close();
      expect(await storedRun(h.target.storage, first.runId)).toMatchObject({ status: "cancelled" });
      // Its turn came: stored cancelled with its user message, after the first run's reply.
      const secondUser = await waitFor(async () =>
        (await readHistory(h, channel.key, first.conversationId)).messages.find((m) => m.role === "user" && m.content === "second"),
      );
      expect(await storedRun(h.target.storage, secondUser.run_id as string)).toMatchObject({ status: "cancelled", executionOrder: [] });
      const roles = (await readHistory(h, channel.key, first.conversationId)).messages.map((m) => `${m.role}:${m.run_id === first.runId ? "first" : "second"}`);
      expect(roles).toEqual(["user:first", "assistant:first", "user:second"]);

      // The conversation goes on: the next run gets its turn and streams.
      const third = await openStream(h, channel.key, { payload: "third", conversation_id: first.conversationId }, "text-delta");
      expect(third.conversationId).toBe(first.conversationId);
      expect(third.delta).toBe("word1 ");
      third.close();
      await storedRun(h.target.storage, third.runId);
      const after = await readHistory(h, channel.key, first.conversationId);
      expect(after.messages.map((m) => m.turn_index)).toEqual(after.messages.map((_, i) => i));
      expect(after.messages.filter((m) => m.role === "user").map((m) => m.content)).toEqual(["first", "second", "third"]);
    });

    it("runs of one conversation take turns: each of 8 concurrent executes sees the state the previous one stored", async () => {
      const channel = await h.channel({ flow: "echo" });
      const opening = await runJson(h, channel.key, { payload: "opening" });
      const runs = await Promise.all(
        Array.from({ length: 8 }, (_, i) => runJson(h, channel.key, { payload: `concurrent ${i}`, conversation_id: opening.conversation_id })),
      );
      const turns = runs.map((run) => (run.output.result as { turn: number }).turn).sort((a, b) => a - b);
      expect(turns).toEqual([2, 3, 4, 5, 6, 7, 8, 9]);
      // In arrival order of their turns: each run's user message and reply are together.
      const { messages } = await readHistory(h, channel.key, opening.conversation_id);
      expect(messages.map((m) => m.turn_index)).toEqual(Array.from({ length: 18 }, (_, i) => i));
      for (let i = 0; i < messages.length; i += 2) {
        expect(messages[i]).toMatchObject({ role: "user" });
        expect(messages[i + 1]).toMatchObject({ role: "assistant", content: `Echo: ${messages[i]?.content}`, run_id: messages[i]?.run_id });
      }
    });
  });
}
