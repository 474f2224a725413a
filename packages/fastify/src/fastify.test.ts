import type { ChannelService } from "@channelkit/core";
import {
  expectExactSignedBody,
  expectPrefixBoundary,
  pingPlugin,
  type RunningTarget,
  type ServiceTargetOptions,
  serviceTarget,
  sqliteTestStore,
  streamingProbe,
} from "@channelkit/testkit";
import Fastify, { type FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { channelkit } from "./index.js";

const running: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((item) => item.close()));
});

/** A host app: Fastify's default parsers, its own routes, hook, 404 handler; channelkit under `prefix`. */
async function hostApp(service: Pick<ChannelService, "handler" | "routes">, prefix: string): Promise<FastifyInstance> {
  const app = Fastify();
  app.addHook("onRequest", async (_request, reply) => {
    reply.header("x-host-hook", "ran");
  });
  app.get("/health", async () => "ok");
  app.post("/orders", async (request) => ({ received: request.body }));
  app.setNotFoundHandler(async (_request, reply) => reply.status(404).send({ host: "not found" }));
  await app.register(channelkit, prefix === "" ? { service } : { service, prefix });
  return app;
}

async function start(prefix: string, serviceOptions?: ServiceTargetOptions["service"]): Promise<RunningTarget & { origin: string }> {
  let origin = "";
  const target = serviceTarget({
    name: "fastify",
    store: sqliteTestStore,
    ...(serviceOptions ? { service: serviceOptions } : {}),
    listen: async (service) => {
      const app = await hostApp(service, prefix);
      origin = await app.listen({ port: 0, host: "127.0.0.1" });
      return { url: origin + prefix, close: () => app.close() };
    },
  });
  const started = await target.start({});
  running.push(started);
  return { ...started, origin };
}

describe("fastify: registered among the host's routes", () => {
  it.each(["/chat", ""])("under %j: host routes, the host's parsers, hooks and 404 handler keep working", async (prefix) => {
    const target = await start(prefix);
    expect(await (await fetch(`${target.origin}/health`)).text()).toBe("ok");
    // The plugin's own content-type parsers stay inside it: the host still parses JSON and text.
    const json = await fetch(`${target.origin}/orders`, { method: "POST", headers: { "content-type": "application/json" }, body: '{"id":7}' });
    expect(await json.json()).toEqual({ received: { id: 7 } });
    const text = await fetch(`${target.origin}/orders`, { method: "POST", headers: { "content-type": "text/plain" }, body: "seven" });
    expect(await text.json()).toEqual({ received: "seven" });

    const { tenant } = await target.admin.createTenant({ name: "host" });
    const { api_key } = await target.admin.createChannel({ tenantId: tenant.id, flow: "echo" });
    const run = await fetch(`${target.url}/public/v1/api/execute`, {
      method: "POST",
      headers: { authorization: `Bearer ${api_key}`, "content-type": "application/json" },
      body: JSON.stringify({ payload: "hi" }),
    });
    expect(run.status).toBe(200);
    expect(run.headers.get("x-host-hook")).toBe("ran");
    expect(((await run.json()) as { output: { messages: { content: string }[] } }).output.messages[0]?.content).toBe("Echo: hi");
    expect((await fetch(`${target.url}/public/v1/api/execute`, { method: "DELETE" })).status).toBe(405);

    for (const path of ["/nope", `${prefix}/nope`, `${prefix}/public/v1/api`]) {
      const response = await fetch(target.origin + path, { method: "POST" });
      expect([path, response.status, await response.json()]).toEqual([path, 404, { host: "not found" }]);
    }
  });
});

describe("fastify: a prefix ends at a path-segment boundary", () => {
  it.each([
    ["prefix /chat", "/chat", undefined, "/chat"],
    ["basePath /chat, no prefix", "", "/chat", "/chat"],
    ["basePath /chat under prefix /api", "/api", "/chat", "/api/chat"],
  ] as const)("%s: /chatping-style paths get the host's 404", async (_name, mountPrefix, basePath, prefix) => {
    const target = await start(mountPrefix, { plugins: [pingPlugin], ...(basePath ? { basePath } : {}) });
    await expectPrefixBoundary({ origin: target.origin, prefix, admin: target.admin });
  });
});

describe("fastify: the exact raw body beside the host's JSON parser", () => {
  it("signatures verify over the raw bytes; the host's default JSON parser never sees them", async () => {
    await expectExactSignedBody(await start("/chat"));
  });
});

describe("fastify: streaming", () => {
  it("stops pulling the service's stream while the client does not read (back-pressure)", async () => {
    const probe = streamingProbe();
    const app = await hostApp(probe.service, "/x");
    const origin = await app.listen({ port: 0, host: "127.0.0.1" });
    running.push(app);
    await probe.expectBackPressure(`${origin}/x/probe/stream`);
  });
});
