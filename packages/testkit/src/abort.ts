import { describe, expect, it } from "vitest";
import { execute, readHistory, waitFor, storedRun } from "./client.js";
import type { Harness } from "./harness.js";
import { sseEvents } from "./sse.js";

const FIFTY_WORDS = Array.from({ length: 50 }, (_, i) => `word${i + 1}`).join(" ");

interface Interrupted {
  runId: string;
  conversationId: string;
  /** Text received before going away. */
  received: string;
}

/**
 * Streams a `slow` run and goes away after `deltas` text deltas (0: right after data-run),
 * as a browser tab that closes.
 */
async function interrupt(h: Harness, key: string, deltas: number, conversationId?: string): Promise<Interrupted> {
  const controller = new AbortController();
  const body = conversationId ? { payload: "go", stream: true, conversation_id: conversationId } : { payload: "go", stream: true };
  const response = await execute(h, key, body, { signal: controller.signal });
  expect(response.status).toBe(200);
  let ids: { run_id: string; conversation_id: string } | undefined;
  let received = "";
  let seen = 0;
  for await (const event of sseEvents(response)) {
    if (event.type === "data-run") ids = event.data;
    if (event.type === "text-delta") {
      received += event.delta;
      seen++;
    }
    if (event.type === "finish" || event.type === "error") throw new Error(`the slow run ended (${event.type}) before the client left`);
    if (ids && seen >= deltas) break;
  }
  controller.abort();
  if (!ids) throw new Error("no data-run event");
  return { runId: ids.run_id, conversationId: ids.conversation_id, received };
}

/** A client that goes away mid-stream cancels the run, which is stored with what it produced. */
export function abortTests(h: Harness): void {
  describe("client disconnect", () => {
    it("aborting a stream stores the run as cancelled with the partial reply, and the conversation goes on", async () => {
      const channel = await h.channel({ flow: "slow" });
      const first = await interrupt(h, channel.key, 3);
      expect(first.received).toBe("word1 word2 word3 ");

      const stored = await storedRun(h.target.storage, first.runId);
      expect(stored).toMatchObject({ id: first.runId, conversationId: first.conversationId, status: "cancelled", error: null });

      const afterFirst = await readHistory(h, channel.key, first.conversationId);
      const [user, partial] = afterFirst.messages;
      expect(afterFirst.messages).toHaveLength(2);
      expect(user).toMatchObject({ role: "user", content: "go", turn_index: 0, run_id: first.runId });
      expect(partial).toMatchObject({ role: "assistant", turn_index: 1, run_id: first.runId });
      // The server may have produced a little more than the client read, never the whole reply.
      expect(partial?.content.startsWith(first.received.trimEnd())).toBe(true);
      expect(FIFTY_WORDS.startsWith(partial?.content ?? "?")).toBe(true);
      expect(partial?.content.length).toBeLessThan(FIFTY_WORDS.length);

      const second = await interrupt(h, channel.key, 0, first.conversationId);
      expect(second.conversationId).toBe(first.conversationId);
      expect(await storedRun(h.target.storage, second.runId)).toMatchObject({ status: "cancelled" });
      const afterSecond = await readHistory(h, channel.key, first.conversationId);
      const turns = afterSecond.messages.map((message) => message.turn_index);
      expect(turns).toEqual(Array.from({ length: turns.length }, (_, i) => i));
      expect(afterSecond.messages[2]).toMatchObject({ role: "user", content: "go", run_id: second.runId });
      for (const message of afterSecond.messages.slice(3)) {
        expect(message.role).toBe("assistant");
        expect(FIFTY_WORDS.startsWith(message.content)).toBe(true);
      }
    });

    it("a run whose client goes away while it waits its turn is stored cancelled in its turn, after the answer of the run before it", async () => {
      const channel = await h.channel({ flow: "slow" });
      const response = await execute(h, channel.key, { payload: "first", stream: true });
      const events = sseEvents(response);
      const opening = (await events.next()).value as { type: string; data: { conversation_id: string; run_id: string } };
      expect(opening.type).toBe("data-run");
      const conversationId = opening.data.conversation_id;
      // Queued behind the first run (5 s of words), its client leaves after data-run.
      const queued = await interrupt(h, channel.key, 0, conversationId);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const meanwhile = await readHistory(h, channel.key, conversationId);
      expect(meanwhile.messages.map((message) => message.content)).toEqual(["first"]);

      let reply = "";
      for await (const event of events) if (event.type === "text-delta") reply += event.delta;
      expect(reply).toBe(FIFTY_WORDS);
      expect(await storedRun(h.target.storage, queued.runId)).toMatchObject({ status: "cancelled", executionOrder: [] });
      const { messages } = await readHistory(h, channel.key, conversationId);
      expect(messages.map((message) => [message.turn_index, message.role, message.content, message.run_id])).toEqual([
        [0, "user", "first", opening.data.run_id],
        [1, "assistant", FIFTY_WORDS, opening.data.run_id],
        [2, "user", "go", queued.runId],
      ]);
    });

    it("a client that goes away before its JSON answer cancels the run, which is stored with what it produced", async () => {
      const channel = await h.channel({ flow: "slow" });
      const { conversationId, runId } = await interrupt(h, channel.key, 0);
      await storedRun(h.target.storage, runId);
      const controller = new AbortController();
      const pending = execute(h, channel.key, { payload: "again", stream: false, conversation_id: conversationId }, { signal: controller.signal });
      pending.catch(() => undefined);
      // The run is under way once its user message could be stored; the slow flow needs 5 s in all.
      await new Promise((resolve) => setTimeout(resolve, 350));
      controller.abort();
      await expect(pending).rejects.toThrow();

      const stored = await waitFor(async () => {
        const { messages } = await readHistory(h, channel.key, conversationId);
        return messages.find((message) => message.role === "user" && message.content === "again") ?? null;
      });
      const run = await storedRun(h.target.storage, stored.run_id as string);
      expect(run).toMatchObject({ conversationId, status: "cancelled" });
      const { messages } = await readHistory(h, channel.key, conversationId);
      const reply = messages.find((message) => message.run_id === run.id && message.role === "assistant");
      expect(FIFTY_WORDS.startsWith(reply?.content ?? "")).toBe(true);
      expect(reply?.content.length ?? 0).toBeLessThan(FIFTY_WORDS.length);
      expect(messages.map((message) => message.turn_index)).toEqual(messages.map((_, i) => i));
    });
  });
}
