import { describe, expect, it } from "vitest";
import { defineFlow } from "../flows/define.js";
import { text } from "../flows/events.js";
import { createChannelService } from "../service.js";
import { memoryStorage } from "../storage/memory.js";

/** A flow's exception reaches its client as the run's error; the server's log gets it too (issue 41). */
describe("a flow that throws", () => {
  it("is logged with its run, channel and conversation ids, for JSON and streamed runs", async () => {
    const errors: unknown[][] = [];
    const broken = defineFlow({
      name: "broken",
      async *run() {
        yield text("half");
        throw new Error("the model is down");
      },
    });
    const service = await createChannelService({
      storage: memoryStorage(),
      flows: [broken],
      secretKey: "ab".repeat(32),
      logger: { warn() {}, error: (...args: unknown[]) => void errors.push(args) },
    });
    const admin = service.admin.as("test");
    const { tenant } = await admin.createTenant({ name: "Acme" });
    const { channel, api_key } = await admin.createChannel({ tenantId: tenant.id, flow: "broken", environment: "prod" });
    for (const stream of [false, true]) {
      const response = await service.handler(
        new Request("http://localhost/public/v1/api/execute", {
          method: "POST",
          headers: { authorization: `Bearer ${api_key}`, "content-type": "application/json" },
          body: JSON.stringify({ payload: "hi", stream }),
        }),
      );
      const body = await response.text();
      expect(body).toContain("the model is down");
      const runId = /"run_id":"([^"]+)"/.exec(body)?.[1];
      const conversationId = /"conversation_id":"([^"]+)"/.exec(body)?.[1];
      const logged = errors.find(([message]) => String(message).includes(`run ${runId}`));
      expect(logged?.[0]).toBe(`channelkit: flow "broken" failed: run ${runId}, channel ${channel.id}, conversation ${conversationId}`);
      expect((logged?.[1] as Error).message).toBe("the model is down");
      // The ids as fields too, for a structured logger (jsonLogger) to make them its line's.
      expect(logged?.[2]).toEqual({ run_id: runId, channel_id: channel.id, conversation_id: conversationId });
    }
    await service.close();
  });
});
