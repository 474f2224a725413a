import { beforeAll, describe, expect, it } from "vitest";
import { expectError, expectNoConversation, history, type HistoryMessage, ISO_TIMESTAMP, readHistory, runJson, UUID } from "./client.js";
import type { Harness, TestChannel } from "./harness.js";

/** Turn indexes of a history's messages. */
const turns = (messages: HistoryMessage[]) => messages.map((message) => message.turn_index);
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
const sum = (messages: HistoryMessage[]) => messages.reduce((total, message) => total + message.token_count, 0);

/** `GET /public/v1/api/conversations/{session_id}/messages`. */
export function historyTests(h: Harness): void {
  describe("conversation history", () => {
    it("returns every field of the response and of each message", async () => {
      const channel = await h.channel({ flow: "echo" });
      const run = await runJson(h, channel.key, { payload: "hello history", metadata: { a: 1 } });
      const response = await history(h, channel.key, run.conversation_id);
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toMatch(/^application\/json\b/);
      const body = (await response.json()) as Record<string, any>;
      expect(Object.keys(body).sort()).toEqual([
        "livechat_conversation_id",
        "livechat_status_message",
        "messages",
        "mode",
        "session_id",
        "total_messages",
        "total_tokens",
      ]);
      expect(body).toMatchObject({
        session_id: run.conversation_id,
        total_messages: 2,
        mode: "bot",
        livechat_status_message: null,
        livechat_conversation_id: null,
      });
      const [user, assistant] = body.messages as HistoryMessage[];
      const fields = [
        "content",
        "livechat_message_id",
        "node_type",
        "origin",
        "role",
        "run_id",
        "sender",
        "step_id",
        "timestamp",
        "token_count",
        "tool_call_id",
        "tool_calls",
        "turn_index",
      ];
      expect(Object.keys(user ?? {}).sort()).toEqual(fields);
      expect(Object.keys(assistant ?? {}).sort()).toEqual(fields);
      expect(user).toMatchObject({
        origin: "agent",
        role: "user",
        content: "hello history",
        turn_index: 0,
        run_id: run.run_id,
        tool_calls: null,
        tool_call_id: null,
        livechat_message_id: null,
        sender: null,
      });
      expect(assistant).toMatchObject({
        origin: "agent",
        role: "assistant",
        content: "Echo: hello history",
        turn_index: 1,
        run_id: run.run_id,
        node_type: "echo",
        tool_calls: null,
        tool_call_id: null,
        livechat_message_id: null,
        sender: null,
      });
      expect(assistant?.step_id).toMatch(UUID);
      for (const message of [user, assistant] as HistoryMessage[]) {
        expect(message.timestamp).toMatch(ISO_TIMESTAMP);
        expect(Number.isInteger(message.token_count) && message.token_count > 0).toBe(true);
      }
      expect(Date.parse(assistant?.timestamp ?? "")).toBeGreaterThanOrEqual(Date.parse(user?.timestamp ?? ""));
      expect(body.total_tokens).toBe(sum(body.messages));
    });

    describe("limit", () => {
      let channel: TestChannel;
      let conversationId: string;
      const RUNS = 26;

      beforeAll(async () => {
        channel = await h.channel({ flow: "echo" });
        conversationId = (await runJson(h, channel.key, { payload: "message 1" })).conversation_id;
        for (let i = 2; i <= RUNS; i++) await runJson(h, channel.key, { payload: `message ${i}`, conversation_id: conversationId });
      });

      it("defaults to the 50 most recent messages, oldest first", async () => {
        const body = await readHistory(h, channel.key, conversationId);
        expect(turns(body.messages)).toEqual(range(2, 2 * RUNS - 1));
        expect(body.total_messages).toBe(50);
        expect(body.total_tokens).toBe(sum(body.messages));
        expect(body.messages.at(-1)?.content).toBe(`Echo: message ${RUNS}`);
      });

      it("keeps the most recent `limit` messages, oldest first; 1 and 200 are accepted", async () => {
        const one = await readHistory(h, channel.key, conversationId, { limit: "1" });
        expect(turns(one.messages)).toEqual([2 * RUNS - 1]);
        expect(one.total_messages).toBe(1);
        expect(one.total_tokens).toBe(one.messages[0]?.token_count);
        const three = await readHistory(h, channel.key, conversationId, { limit: "3" });
        expect(three.messages.map((message) => message.content)).toEqual([`Echo: message ${RUNS - 1}`, `message ${RUNS}`, `Echo: message ${RUNS}`]);
        const all = await readHistory(h, channel.key, conversationId, { limit: "200" });
        expect(turns(all.messages)).toEqual(range(0, 2 * RUNS - 1));
        expect(all.total_messages).toBe(2 * RUNS);
        expect(all.total_tokens).toBe(sum(all.messages));
      });

      it.each(["0", "201", "abc", "1.5", "-1", ""])("422 validation_error for limit=%j", async (limit) => {
        await expectError(await history(h, channel.key, conversationId, { limit }), 422, "validation_error");
      });

      it.each(["abc", "-1", "1.5"])("422 validation_error for token_budget=%j", async (budget) => {
        await expectError(await history(h, channel.key, conversationId, { token_budget: budget }), 422, "validation_error");
      });
    });

    describe("token_budget", () => {
      let channel: TestChannel;
      let conversationId: string;
      let all: HistoryMessage[];

      beforeAll(async () => {
        channel = await h.channel({ flow: "echo" });
        conversationId = (await runJson(h, channel.key, { payload: "a" })).conversation_id;
        await runJson(h, channel.key, { payload: "x".repeat(400), conversation_id: conversationId });
        await runJson(h, channel.key, { payload: "b", conversation_id: conversationId });
        all = (await readHistory(h, channel.key, conversationId)).messages;
      });

      it("0 (the default) means no budget", async () => {
        const body = await readHistory(h, channel.key, conversationId, { token_budget: "0" });
        expect(body.messages).toEqual(all);
        expect(body.total_tokens).toBe(sum(all));
      });

      it("keeps the most recent messages whose tokens fit, and stops at the first that does not", async () => {
        const [, smallOld, , big, ...recent] = all as [HistoryMessage, HistoryMessage, HistoryMessage, HistoryMessage, ...HistoryMessage[]];
        // An older small message would still fit after the big one is refused: it must not be taken.
        const budget = sum(recent) + smallOld.token_count;
        expect(big.token_count).toBeGreaterThan(smallOld.token_count);
        const body = await readHistory(h, channel.key, conversationId, { token_budget: String(budget) });
        expect(body.messages).toEqual(recent);
        expect(body.total_messages).toBe(recent.length);
        expect(body.total_tokens).toBe(sum(recent));
      });

      it("a budget equal to the sum of the last messages keeps exactly those", async () => {
        const lastFour = all.slice(-4);
        const body = await readHistory(h, channel.key, conversationId, { token_budget: String(sum(lastFour)) });
        expect(turns(body.messages)).toEqual(turns(lastFour));
        expect(body.total_tokens).toBe(sum(lastFour));
      });

      it("a budget smaller than the newest message returns no message", async () => {
        const newest = all.at(-1) as HistoryMessage;
        expect(newest.token_count).toBeGreaterThan(1);
        const body = await readHistory(h, channel.key, conversationId, { token_budget: String(newest.token_count - 1) });
        expect(body).toMatchObject({ messages: [], total_messages: 0, total_tokens: 0, session_id: conversationId });
      });

      it("applies after limit", async () => {
        const body = await readHistory(h, channel.key, conversationId, { limit: "2", token_budget: String(sum(all)) });
        expect(turns(body.messages)).toEqual(turns(all.slice(-2)));
      });
    });

    describe("404 in the framework's format", () => {
      it("for an unknown conversation id", async () => {
        const channel = await h.channel({ flow: "echo" });
        const id = crypto.randomUUID();
        await expectNoConversation(await history(h, channel.key, id), id);
      });

      it("for an id that is not a UUID", async () => {
        const channel = await h.channel({ flow: "echo" });
        await expectNoConversation(await history(h, channel.key, "session-42"), "session-42");
      });

      it("for a conversation of another channel of the same tenant", async () => {
        const tenantId = await h.tenant();
        const owner = await h.channel({ flow: "echo", tenantId });
        const other = await h.channel({ flow: "echo", tenantId });
        const run = await runJson(h, owner.key, { payload: "mine" });
        await expectNoConversation(await history(h, other.key, run.conversation_id), run.conversation_id);
      });

      it("for a conversation of another tenant", async () => {
        const owner = await h.channel({ flow: "echo" });
        const stranger = await h.channel({ flow: "echo" });
        const run = await runJson(h, owner.key, { payload: "mine" });
        await expectNoConversation(await history(h, stranger.key, run.conversation_id), run.conversation_id);
      });
    });
  });
}
