import { describe, expect, it } from "vitest";
import { execute, expectError, ISO_TIMESTAMP, readHistory, runJson, UUID, storedRun } from "./client.js";
import type { Harness } from "./harness.js";

/** The JSON answer of execute, and when execute answers JSON rather than a stream. */
export function executeJsonTests(h: Harness): void {
  describe("execute, JSON response", () => {
    it("returns the complete run document", async () => {
      const channel = await h.channel({ flow: "echo", environment: "staging" });
      const response = await execute(h, channel.key, { payload: "hello world", stream: false, metadata: { source: "contract" } });
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toMatch(/^application\/json\b/);
      const run = (await response.json()) as Record<string, any>;

      expect(Object.keys(run).sort()).toEqual(["conversation_id", "error", "output", "run_id", "status", "usage"]);
      expect(run.run_id).toMatch(UUID);
      expect(run.conversation_id).toMatch(UUID);
      expect(run.conversation_id).not.toBe(run.run_id);
      expect(run.status).toBe("success");
      expect(run.error).toBeNull();

      expect(Object.keys(run.output).sort()).toEqual(["error", "messages", "metadata", "result"]);
      expect(run.output.result).toEqual({ echo: "hello world", turn: 1 });
      expect(run.output.error).toBeNull();
      expect(run.output.messages).toEqual([{ role: "assistant", content: "Echo: hello world" }]);

      const metadata = run.output.metadata;
      expect(Object.keys(metadata).sort()).toEqual([
        "channel_id",
        "completed_at",
        "environment",
        "execution_order",
        "flow_id",
        "flow_name",
        "flow_version",
        "livechat_mode",
        "started_at",
      ]);
      expect(metadata.channel_id).toBe(channel.id);
      expect(metadata.flow_id).toMatch(UUID);
      expect(metadata.flow_name).toBe("echo");
      expect(metadata.flow_version === null || typeof metadata.flow_version === "string").toBe(true);
      expect(metadata.environment).toBe("staging");
      expect(metadata.execution_order).toEqual(["echo"]);
      expect(metadata.started_at).toMatch(ISO_TIMESTAMP);
      expect(metadata.completed_at).toMatch(ISO_TIMESTAMP);
      const started = Date.parse(metadata.started_at);
      const completed = Date.parse(metadata.completed_at);
      expect(completed).toBeGreaterThanOrEqual(started);
      expect(metadata.livechat_mode).toBeNull();

      expect(Object.keys(run.usage).sort()).toEqual(["duration_ms", "total_nodes"]);
      expect(run.usage.total_nodes).toBe(1);
      expect(Number.isInteger(run.usage.duration_ms)).toBe(true);
      expect(run.usage.duration_ms).toBeGreaterThanOrEqual(0);
      expect(run.usage.duration_ms).toBeLessThanOrEqual(completed - started + 1);
    });

    it("the flow id is stable across runs and channels of the same flow", async () => {
      const first = await h.channel({ flow: "echo" });
      const second = await h.channel({ flow: "echo" });
      const a = await runJson(h, first.key, { payload: "a" });
      const b = await runJson(h, second.key, { payload: "b" });
      expect(a.output.metadata.flow_id).toBe(b.output.metadata.flow_id);
      expect(a.run_id).not.toBe(b.run_id);
      expect(a.conversation_id).not.toBe(b.conversation_id);
    });

    it("the run is stored with the ids and outcome of the response", async () => {
      const channel = await h.channel({ flow: "echo" });
      const run = await runJson(h, channel.key, { payload: "stored" });
      const stored = await storedRun(h.target.storage, run.run_id);
      expect(stored).toMatchObject({
        id: run.run_id,
        conversationId: run.conversation_id,
        channelId: channel.id,
        tenantId: channel.tenantId,
        status: "success",
        flowName: "echo",
        result: { echo: "stored", turn: 1 },
        error: null,
        executionOrder: ["echo"],
      });
    });

    it("a payload with control characters, U+0000 included, runs and is stored as sent, on every store", async () => {
      const channel = await h.channel({ flow: "echo" });
      const payload = "a\u0000b\u0001c";
      const run = await runJson(h, channel.key, { payload });
      expect(run.status).toBe("success");
      expect(run.output.messages).toEqual([{ role: "assistant", content: `Echo: ${payload}` }]);
      const { messages } = await readHistory(h, channel.key, run.conversation_id);
      expect(messages.map((m) => m.content)).toEqual([payload, `Echo: ${payload}`]);
    });

    it("503 flow_unavailable in the envelope, naming the flow, when the channel's flow is not registered by the service", async () => {
      const channel = await h.channel({ flow: "echo" });
      // The admin API refuses unknown flows, so the binding is broken in storage directly.
      await h.target.storage.updateChannel(channel.id, { flowName: "not-registered" }, new Date().toISOString());
      for (const stream of [false, true]) {
        const response = await execute(h, channel.key, { payload: "hi", stream });
        const body = (await response.clone().json()) as { error: { message: string } };
        await expectError(response, 503, "flow_unavailable");
        expect(body.error.message).toContain('"not-registered"');
      }
    });

    const combos: [boolean, boolean | undefined, "json" | "sse"][] = [
      [false, undefined, "json"],
      [false, false, "json"],
      [false, true, "sse"],
      [true, undefined, "sse"],
      [true, false, "json"],
      [true, true, "sse"],
    ];
    it.each(combos)("default_stream %s with stream %s answers %s", async (defaultStream, stream, expected) => {
      const channel = await h.channel({ flow: "echo", defaultStream });
      expect(channel.view.default_stream).toBe(defaultStream);
      const response = await execute(h, channel.key, stream === undefined ? { payload: "which" } : { payload: "which", stream });
      expect(response.status).toBe(200);
      const type = response.headers.get("content-type") ?? "";
      const text = await response.text();
      if (expected === "sse") {
        expect(type).toBe("text/event-stream; charset=utf-8");
        const first = /^data: (.*)\n\n/.exec(text)?.[1] ?? "null";
        expect((JSON.parse(first) as { type?: string } | null)?.type).toBe("data-run");
      } else {
        expect(type).toMatch(/^application\/json\b/);
        expect((JSON.parse(text) as { status: string }).status).toBe("success");
      }
    });
  });
}
