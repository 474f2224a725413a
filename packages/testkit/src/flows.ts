import type { UIStreamEvent } from "@channelkit/core";
import { describe, expect, it } from "vitest";
import { execute, readHistory, runJson, storedRun } from "./client.js";
import type { Harness } from "./harness.js";
import { runIds, runStream, sseEvents, streamedText } from "./sse.js";

const FIFTY_WORDS = Array.from({ length: 50 }, (_, i) => `word${i + 1}`).join(" ");

/** Each built-in demo flow, as decisions.md describes it. */
export function flowTests(h: Harness): void {
  describe("demo flows", () => {
    it("echo replies `Echo: <payload>` and counts the conversation's user messages", async () => {
      const channel = await h.channel({ flow: "echo" });
      const run = await runJson(h, channel.key, { payload: "ping" });
      expect(run.output.messages).toEqual([{ role: "assistant", content: "Echo: ping" }]);
      expect(run.output.result).toEqual({ echo: "ping", turn: 1 });
    });

    it("fail, JSON: 200 with status error, the flow's message, flow_error, and what it said before failing", async () => {
      const channel = await h.channel({ flow: "fail" });
      const run = await runJson(h, channel.key, { payload: "go" });
      expect(run.status).toBe("error");
      expect(run.output.result).toBeNull();
      expect(run.output.error).toBe("flow failed on purpose");
      expect(run.output.messages).toEqual([{ role: "assistant", content: "Working on it" }]);
      expect(run.error).toEqual({ code: "flow_error", message: expect.any(String) });
      expect(run.error?.message.length).toBeGreaterThan(0);
      expect(run.output.metadata.execution_order).toEqual(["fail"]);
      expect(await storedRun(h.target.storage, run.run_id)).toMatchObject({ status: "error", error: "flow failed on purpose" });
      const history = await readHistory(h, channel.key, run.conversation_id);
      expect(history.messages.map((message) => [message.role, message.content])).toEqual([
        ["user", "go"],
        ["assistant", "Working on it"],
      ]);
    });

    it("fail, streamed: the text, then an error event with errorText, and no finish", async () => {
      const channel = await h.channel({ flow: "fail" });
      const { events } = await runStream(h, channel.key, { payload: "go" });
      expect(events.map((event) => event.type)).toEqual(["data-run", "text-start", "text-delta", "text-end", "error"]);
      expect(streamedText(events)).toBe("Working on it");
      const last = events.at(-1) as Extract<UIStreamEvent, { type: "error" }>;
      expect(typeof last.errorText).toBe("string");
      expect(last.errorText.length).toBeGreaterThan(0);
      expect(await storedRun(h.target.storage, runIds(events).run_id)).toMatchObject({ status: "error" });
    });

    it("ask pauses with a question (pending), and the next run on the conversation answers", async () => {
      const channel = await h.channel({ flow: "ask" });
      const asked = await runJson(h, channel.key, { payload: "hi" });
      expect(asked.status).toBe("pending");
      expect(asked.error).toBeNull();
      expect(asked.output.messages).toEqual([{ role: "assistant", content: "What is your name?" }]);
      expect(asked.output.metadata.livechat_mode).toBeNull();
      const answered = await runJson(h, channel.key, { payload: "Ada", conversation_id: asked.conversation_id });
      expect(answered.status).toBe("success");
      expect(answered.output.messages).toEqual([{ role: "assistant", content: "Nice to meet you, Ada!" }]);
      expect(await storedRun(h.target.storage, asked.run_id)).toMatchObject({ status: "pending" });
    });

    it("ask, streamed: the question, then finish", async () => {
      const channel = await h.channel({ flow: "ask" });
      const { events } = await runStream(h, channel.key, { payload: "hi" });
      expect(streamedText(events)).toBe("What is your name?");
      expect(events.at(-1)).toEqual({ type: "finish", finishReason: "stop", messageMetadata: { status: "pending", livechat_mode: null } });
      const { events: next } = await runStream(h, channel.key, { payload: "Grace", conversation_id: runIds(events).conversation_id });
      expect(streamedText(next)).toBe("Nice to meet you, Grace!");
    });

    it("handover is pending with livechat_mode livechat_waiting, and history reports that mode", async () => {
      const waiting = "An agent will be with you shortly.";
      const channel = await h.channel({ flow: "handover", livechatMessages: { livechat_waiting: waiting } });
      const run = await runJson(h, channel.key, { payload: "human please" });
      expect(run.status).toBe("pending");
      expect(run.output.metadata.livechat_mode).toBe("livechat_waiting");
      expect(run.output.messages).toEqual([{ role: "assistant", content: "Connecting you to an agent" }]);
      const history = await readHistory(h, channel.key, run.conversation_id);
      expect(history.mode).toBe("livechat_waiting");
      expect(history.livechat_status_message).toBe(waiting);
      expect(history.livechat_conversation_id).toBeNull();
    });

    it("a run past its channel's time limit is stopped and stored as an error that says so, JSON and streamed", async () => {
      const channel = await h.channel({ flow: "slow", runTimeoutSeconds: 1 });
      const started = Date.now();
      const run = await runJson(h, channel.key, { payload: "too long", stream: false });
      expect(Date.now() - started).toBeLessThan(4000);
      expect(run.status).toBe("error");
      expect(run.error).toEqual({ code: "flow_error", message: "The flow ran longer than the channel's limit of 1 s and was stopped." });
      expect(await storedRun(h.target.storage, run.run_id)).toMatchObject({ status: "error", error: run.error?.message });
      const streamed = await runStream(h, channel.key, { payload: "too long" });
      expect(streamed.events.at(-1)).toEqual({ type: "error", errorText: "The flow ran longer than the channel's limit of 1 s and was stopped." });
      expect(streamedText(streamed.events)).toMatch(/^word1 /);
    });

    it("slow streams 50 words as they are produced, not buffered to the end", async () => {
      const channel = await h.channel({ flow: "slow" });
      const response = await execute(h, channel.key, { payload: "go", stream: true });
      expect(response.status).toBe(200);
      const events: UIStreamEvent[] = [];
      const deltaTimes: number[] = [];
      for await (const event of sseEvents(response)) {
        events.push(event);
        if (event.type === "text-delta") deltaTimes.push(Date.now());
      }
      expect(deltaTimes).toHaveLength(50);
      expect(streamedText(events)).toBe(FIFTY_WORDS);
      expect(events.at(-1)).toEqual({ type: "finish", finishReason: "stop", messageMetadata: { status: "success", livechat_mode: null } });
      // The flow waits 100 ms per word: deltas spread over ~5 s unless something buffers them.
      expect((deltaTimes.at(-1) as number) - (deltaTimes[0] as number)).toBeGreaterThan(3000);
    });
  });
}
