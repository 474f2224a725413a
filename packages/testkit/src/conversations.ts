import { describe, expect, it } from "vitest";
import { execute, expectError, readHistory, runJson } from "./client.js";
import type { Harness } from "./harness.js";

/** Resuming conversations with `conversation_id`, and who may resume which. */
export function conversationTests(h: Harness): void {
  describe("conversations", () => {
    it("conversation_id resumes the conversation: turns continue contiguously and the flow's state carries over", async () => {
      const channel = await h.channel({ flow: "echo" });
      const first = await runJson(h, channel.key, { payload: "one" });
      const second = await runJson(h, channel.key, { payload: "two", conversation_id: first.conversation_id });
      const third = await runJson(h, channel.key, { payload: "three", conversation_id: first.conversation_id });
      expect([first, second, third].map((run) => run.conversation_id)).toEqual(Array(3).fill(first.conversation_id));
      expect(new Set([first.run_id, second.run_id, third.run_id]).size).toBe(3);
      expect([first, second, third].map((run) => run.output.result)).toEqual([
        { echo: "one", turn: 1 },
        { echo: "two", turn: 2 },
        { echo: "three", turn: 3 },
      ]);
      const body = await readHistory(h, channel.key, first.conversation_id);
      expect(body.messages.map((message) => [message.turn_index, message.role, message.content])).toEqual([
        [0, "user", "one"],
        [1, "assistant", "Echo: one"],
        [2, "user", "two"],
        [3, "assistant", "Echo: two"],
        [4, "user", "three"],
        [5, "assistant", "Echo: three"],
      ]);
    });

    it("omitting conversation_id starts a new conversation each time", async () => {
      const channel = await h.channel({ flow: "echo" });
      const a = await runJson(h, channel.key, { payload: "a" });
      const b = await runJson(h, channel.key, { payload: "b" });
      expect(a.conversation_id).not.toBe(b.conversation_id);
      expect(b.output.result).toEqual({ echo: "b", turn: 1 });
    });

    it("concurrent executes on one conversation get contiguous turn indexes, each run's messages together", async () => {
      const channel = await h.channel({ flow: "echo" });
      const first = await runJson(h, channel.key, { payload: "start" });
      const runs = await Promise.all(
        Array.from({ length: 6 }, (_, i) => runJson(h, channel.key, { payload: `parallel ${i}`, conversation_id: first.conversation_id })),
      );
      const body = await readHistory(h, channel.key, first.conversation_id);
      expect(body.messages.map((message) => message.turn_index)).toEqual(Array.from({ length: 14 }, (_, i) => i));
      for (const run of [first, ...runs]) {
        const own = body.messages.filter((message) => message.run_id === run.run_id);
        expect(own.map((message) => message.role)).toEqual(["user", "assistant"]);
        expect((own[1]?.turn_index ?? -1) - (own[0]?.turn_index ?? 0)).toBe(1);
      }
    });

    it("404 conversation_not_found for an unknown conversation_id (it is not a client-chosen tag)", async () => {
      const channel = await h.channel({ flow: "echo" });
      await expectError(await execute(h, channel.key, { payload: "hi", conversation_id: crypto.randomUUID() }), 404, "conversation_not_found");
      // A UUID in its text form, whatever its version and variant bits say.
      for (const id of ["11111111-1111-1111-1111-111111111111", "12345678-1234-1234-1234-123456789ABC", "3f2504e0-4f89-01d3-ca0c-0305e82c3301"]) {
        await expectError(await execute(h, channel.key, { payload: "hi", conversation_id: id }), 404, "conversation_not_found");
      }
    });

    it("403 conversation_forbidden for a conversation of another channel of the same tenant", async () => {
      const tenantId = await h.tenant();
      const owner = await h.channel({ flow: "echo", tenantId });
      const other = await h.channel({ flow: "echo", tenantId });
      const run = await runJson(h, owner.key, { payload: "mine" });
      await expectError(await execute(h, other.key, { payload: "yours?", conversation_id: run.conversation_id }), 403, "conversation_forbidden");
      // The refused attempt left the conversation untouched.
      expect((await readHistory(h, owner.key, run.conversation_id)).total_messages).toBe(2);
    });

    it("404 conversation_not_found for a conversation of another tenant (its existence is not revealed)", async () => {
      const owner = await h.channel({ flow: "echo" });
      const stranger = await h.channel({ flow: "echo" });
      const run = await runJson(h, owner.key, { payload: "mine" });
      await expectError(await execute(h, stranger.key, { payload: "yours?", conversation_id: run.conversation_id }), 404, "conversation_not_found");
    });
  });
}
