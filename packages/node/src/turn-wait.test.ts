import { type ChannelService, createChannelService } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { describeWithPostgres, postgresTestStore, sqliteTestStore, type TestStore } from "@channelkit/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, serve } from "./serve.js";

/** The test's limit on a run's wait for its turn: the `slow` flow holds a turn 5 s. */
const WAIT_MS = 300;

/**
 * A run that waits for its conversation's turn past `turnWaitTimeoutMs` gives its place up:
 * nothing of it is stored, its client is answered `503 conversation_busy` with `Retry-After`
 * (a stream that began ends with an `error` event saying so), and the conversation goes on
 * as if it never came.
 */
function turnWaitTests(name: string, open: () => Promise<TestStore>) {
  describe(`a wait for a turn past turnWaitTimeoutMs: ${name}`, () => {
    let store: TestStore;
    let service: ChannelService;
    let server: RunningServer;
    let key: string;

    beforeAll(async () => {
      store = await open();
      service = await createChannelService({ storage: store.storage, flows: demoFlows, logger: { warn() {}, error() {} }, turnWaitTimeoutMs: WAIT_MS });
      server = await serve(service, { port: 0 });
      const { tenant } = await service.admin.createTenant({ name: "busy" });
      key = (await service.admin.createChannel({ tenantId: tenant.id, flow: "slow" })).api_key;
    });

    afterAll(async () => {
      await server?.close();
      await service?.close();
      await store?.dispose();
    });

    const execute = (body: Record<string, unknown>) =>
      fetch(`${server.url}/public/v1/api/execute`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });

    it("is 503 conversation_busy with Retry-After (JSON), an error event (stream); nothing of it is stored, and the conversation goes on", async () => {
      const holder = await execute({ payload: "holder", stream: true });
      const reader = (holder.body as ReadableStream<Uint8Array>).getReader();
      const opening = new TextDecoder().decode((await reader.read()).value);
      const conversationId = (/"conversation_id":"([^"]+)"/.exec(opening) as RegExpExecArray)[1] as string;

      const json = await execute({ payload: "busy json", conversation_id: conversationId, stream: false });
      expect(json.status).toBe(503);
      expect(json.headers.get("retry-after")).toBe("5");
      expect(await json.json()).toEqual({ error: { code: "conversation_busy", message: expect.stringContaining("waited for its turn") } });

      const streamed = await execute({ payload: "busy stream", conversation_id: conversationId, stream: true });
      expect(streamed.status).toBe(200);
      const events = (await streamed.text())
        .trim()
        .split("\n\n")
        .map((frame) => JSON.parse(frame.replace(/^data: /, "")) as { type: string; errorText?: string });
      expect(events.map((event) => event.type)).toEqual(["data-run", "error"]);
      expect(events[1]?.errorText).toContain("waited for its turn");

      while (!(await reader.read()).done);
      // The refused runs gave their tickets back: the next run takes the turn at once.
      const after = await execute({ payload: "after", conversation_id: conversationId, stream: false });
      expect(after.status).toBe(200);
      expect(((await after.json()) as { status: string }).status).toBe("success");
      const history = (await (
        await fetch(`${server.url}/public/v1/api/conversations/${conversationId}/messages`, { headers: { authorization: `Bearer ${key}` } })
      ).json()) as { messages: { turn_index: number; role: string; content: string }[] };
      expect(history.messages.filter((m) => m.role === "user").map((m) => m.content)).toEqual(["holder", "after"]);
      expect(history.messages.map((m) => m.turn_index)).toEqual(history.messages.map((_, i) => i));
    }, 30_000);
  });
}

turnWaitTests("SQLite", sqliteTestStore);
describeWithPostgres("Postgres", (serverUrl) => turnWaitTests("Postgres", () => postgresTestStore(serverUrl)));
