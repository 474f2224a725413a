import { type AccessLogEntry, createChannelService, defineFlow, jsonLogger, memoryStorage } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, serve } from "./serve.js";

/** Fails at once, as a flow whose model is down. */
const broken = defineFlow({
  name: "broken",
  // biome-ignore lint/correctness/useYield: it fails before it says anything
  async *run() {
    throw new Error("the model is down");
  },
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe("X-Request-Id and JSON logs", () => {
  const lines: string[] = [];
  const accessed: AccessLogEntry[] = [];
  let server: RunningServer;
  let service: Awaited<ReturnType<typeof createChannelService>>;
  let key = "";

  beforeAll(async () => {
    service = await createChannelService({
      storage: memoryStorage(),
      flows: [...demoFlows, broken],
      secretKey: "9b".repeat(32),
      logger: jsonLogger({ write: (line) => lines.push(line) }),
      accessLog: (entry) => accessed.push(entry),
    });
    server = await serve(service, { port: 0, host: "127.0.0.1" });
    const { tenant } = await service.admin.createTenant({ name: "ids" });
    key = (await service.admin.createChannel({ tenantId: tenant.id, flow: "broken" })).api_key;
  });
  afterAll(async () => {
    await server?.close();
    await service?.close();
  });

  const get = (headers: Record<string, string> = {}) => fetch(`${server.url}/healthz`, { headers });

  it("answers every request with an id: the one given in X-Request-Id when it is a plain token, else a new UUID", async () => {
    const made = (await get()).headers.get("x-request-id");
    expect(made).toMatch(UUID);
    expect((await get()).headers.get("x-request-id")).not.toBe(made);
    expect((await get({ "x-request-id": "lb-7f3a:42@edge.1" })).headers.get("x-request-id")).toBe("lb-7f3a:42@edge.1");
    // Nothing a log line could be forged with, nor a flood: replaced.
    for (const given of ["two words", "a".repeat(129), "x\u00e9", '"quoted"']) {
      expect((await get({ "x-request-id": given })).headers.get("x-request-id"), given).toMatch(UUID);
    }
    // Errors too, and routes that do not exist.
    expect((await fetch(`${server.url}/nowhere`, { headers: { "x-request-id": "r-404" } })).headers.get("x-request-id")).toBe("r-404");
  });

  it("a failed flow is one JSON log line with its level and the run's, channel's and conversation's ids", async () => {
    const response = await fetch(`${server.url}/public/v1/api/execute`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ payload: "hi" }),
    });
    const document = (await response.json()) as { run_id: string; conversation_id: string };
    const line = lines.map((text) => JSON.parse(text) as Record<string, any>).find((entry) => entry.run_id === document.run_id);
    expect(line).toMatchObject({ level: "error", conversation_id: document.conversation_id, err: { message: "the model is down" } });
    expect(line?.channel_id).toMatch(UUID);
    expect(line?.msg).toContain('flow "broken" failed');
  });

  it("accessLog: one entry per request once answered, a stream's once it ended, with its route, status, duration and request id", async () => {
    const { tenant } = await service.admin.createTenant({ name: "access" });
    // The slow demo flow writes for 5 s: its stream is open long after its first chunk.
    const slow = (await service.admin.createChannel({ tenantId: tenant.id, flow: "slow" })).api_key;
    const streamed = await fetch(`${server.url}/public/v1/api/execute?debug=1`, {
      method: "POST",
      headers: { authorization: `Bearer ${slow}`, "content-type": "application/json", "x-request-id": "stream-1" },
      body: JSON.stringify({ payload: "hello", stream: true }),
    });
    // Not before the stream's end: its entry has the whole duration.
    const reader = (streamed.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    expect(accessed.find((entry) => entry.request_id === "stream-1")).toBeUndefined();
    while (!(await reader.read()).done);
    await new Promise((resolve) => setImmediate(resolve));
    expect(accessed.find((entry) => entry.request_id === "stream-1")?.duration_ms).toBeGreaterThan(1000);
    expect(accessed.find((entry) => entry.request_id === "stream-1")).toMatchObject({
      method: "POST",
      path: "/public/v1/api/execute",
      route: "/public/v1/api/execute",
      status: 200,
      client_address: "127.0.0.1",
    });
    await fetch(`${server.url}/nowhere`, { headers: { "x-request-id": "missing-1" } });
    expect(accessed.find((entry) => entry.request_id === "missing-1")).toMatchObject({ path: "/nowhere", route: null, status: 404 });
    for (const entry of accessed) expect(entry.duration_ms).toBeGreaterThanOrEqual(0);
    expect(JSON.stringify(accessed)).not.toContain(slow);
  });
});
