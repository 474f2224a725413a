import { createServer } from "node:http";
import type { ChannelService } from "@channelkit/core";
import {
  expectExactSignedBody,
  expectPrefixBoundary,
  type ListeningServer,
  listenOnFreePort,
  pingPlugin,
  type RunningTarget,
  type ServiceTargetOptions,
  serviceTarget,
  sqliteTestStore,
  streamingProbe,
} from "@channelkit/testkit";
import express, { type Express } from "express";
import { afterEach, describe, expect, it } from "vitest";
import { channelkit, keepRawBody, mountChannelkit } from "./index.js";

const running: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((item) => item.close()));
});

/**
 * A host app around channelkit: a global JSON parser (installed before `mount` runs, unless
 * `parserFirst` is false), its own routes, its own 404 and error handler.
 */
function hostApp(mount: (app: Express) => void, parserFirst = true): Express {
  const app = express();
  if (parserFirst) app.use(express.json());
  mount(app);
  if (!parserFirst) app.use(express.json());
  app.get("/health", (_req, res) => void res.send("ok"));
  app.post("/orders", (req, res) => void res.json({ received: req.body as unknown }));
  app.use((_req, res) => void res.status(404).json({ host: "not found" }));
  app.use((error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    res.status(500).json({ host: "error", message: error.message });
  });
  return app;
}

/** Starts a service on a fresh SQLite store behind the host app that `mount` builds. */
async function start(
  mount: (app: Express, service: ChannelService) => void,
  prefix = "",
  parserFirst = true,
  serviceOptions?: ServiceTargetOptions["service"],
): Promise<RunningTarget & { origin: string }> {
  let origin = "";
  const target = serviceTarget({
    name: "express",
    store: sqliteTestStore,
    ...(serviceOptions ? { service: serviceOptions } : {}),
    listen: async (service): Promise<ListeningServer> => {
      const server = await listenOnFreePort(createServer(hostApp((app) => mount(app, service), parserFirst)));
      origin = server.url;
      return { ...server, url: server.url + prefix };
    },
  });
  const started = await target.start({});
  running.push(started);
  return { ...started, origin };
}

async function echo(url: string, admin: ChannelService["admin"]): Promise<Response> {
  const { tenant } = await admin.createTenant({ name: "host" });
  const { api_key } = await admin.createChannel({ tenantId: tenant.id, flow: "echo" });
  return fetch(`${url}/public/v1/api/execute`, {
    method: "POST",
    headers: { authorization: `Bearer ${api_key}`, "content-type": "application/json" },
    body: JSON.stringify({ payload: "hi" }),
  });
}

describe("express: mounted among the host's routes", () => {
  it.each([
    [
      "mountChannelkit under /chat, after the parser",
      (app: Express, service: ChannelService) => mountChannelkit(app, service, { path: "/chat" }),
      "/chat",
      true,
    ],
    [
      "app.use('/chat', channelkit(service)) before the parser",
      (app: Express, service: ChannelService) => app.use("/chat", channelkit(service)),
      "/chat",
      false,
    ],
    ["mountChannelkit at the root, after the parser", (app: Express, service: ChannelService) => mountChannelkit(app, service), "", true],
  ] as const)("%s: host routes, the host parser and the host 404 keep working", async (_name, mount, prefix, parserFirst) => {
    const target = await start(mount, prefix, parserFirst);
    expect(await (await fetch(`${target.origin}/health`)).text()).toBe("ok");
    const order = await fetch(`${target.origin}/orders`, { method: "POST", headers: { "content-type": "application/json" }, body: '{"id":7}' });
    expect(await order.json()).toEqual({ received: { id: 7 } });

    const run = await echo(target.url, target.admin);
    expect(run.status).toBe(200);
    expect(((await run.json()) as { output: { messages: { content: string }[] } }).output.messages[0]?.content).toBe("Echo: hi");
    // A channel path with another method is the service's own answer: 405 with Allow.
    const wrongMethod = await fetch(`${target.url}/public/v1/api/execute`, { method: "DELETE" });
    expect(wrongMethod.status).toBe(405);

    for (const path of ["/nope", `${prefix}/nope`, `${prefix}/public/v1/api`, `${prefix}/PUBLIC/v1/api/execute`]) {
      const response = await fetch(target.origin + path, { method: "POST" });
      expect([path, response.status, await response.json()]).toEqual([path, 404, { host: "not found" }]);
    }
    if (prefix !== "") {
      expect((await fetch(`${target.origin}/public/v1/api/execute`, { method: "POST" })).status).toBe(404);
    }
  });
});

describe("express: a prefix ends at a path-segment boundary", () => {
  it.each([
    ["app.use('/chat', channelkit(service))", (app: Express, service: ChannelService) => app.use("/chat", channelkit(service)), "/chat", undefined, false],
    ["mountChannelkit under /chat", (app: Express, service: ChannelService) => mountChannelkit(app, service, { path: "/chat" }), "/chat", undefined, true],
    ["basePath /chat, channelkit(service) at the root", (app: Express, service: ChannelService) => app.use(channelkit(service)), "/chat", "/chat", false],
    [
      "basePath /chat, mountChannelkit under /api",
      (app: Express, service: ChannelService) => mountChannelkit(app, service, { path: "/api" }),
      "/api/chat",
      "/chat",
      true,
    ],
  ] as const)("%s: /chatping-style paths get the host's 404", async (_name, mount, prefix, basePath, parserFirst) => {
    const target = await start(mount, prefix, parserFirst, { plugins: [pingPlugin], ...(basePath ? { basePath } : {}) });
    await expectPrefixBoundary({ origin: target.origin, prefix, admin: target.admin });
  });
});

describe("express: the exact raw body behind the host's body parser", () => {
  it("mountChannelkit installed after a global express.json(): signatures verify over the raw bytes", async () => {
    const target = await start((app, service) => mountChannelkit(app, service, { path: "/chat" }), "/chat");
    await expectExactSignedBody(target);
  });

  it("channelkit(service) after express.json({ verify: keepRawBody }): the kept bytes are used", async () => {
    const target = await start(
      (app, service) => {
        app.use(express.json({ verify: keepRawBody }));
        app.use(channelkit(service));
      },
      "",
      false,
    );
    await expectExactSignedBody(target);
  });

  it("channelkit(service) after a plain express.json(): the host's error handler gets an error naming the fix", async () => {
    const target = await start((app, service) => app.use(channelkit(service)));
    const response = await echo(target.url, target.admin);
    expect(response.status).toBe(500);
    const body = (await response.json()) as { host: string; message: string };
    expect(body.host).toBe("error");
    expect(body.message).toContain("mountChannelkit");
    expect(body.message).toContain("keepRawBody");
  });

  it("a body the host parser does not parse (text/plain) still reaches the service: 415", async () => {
    const target = await start((app, service) => app.use(channelkit(service)));
    const { tenant } = await target.admin.createTenant({ name: "host" });
    const { api_key } = await target.admin.createChannel({ tenantId: tenant.id, flow: "echo" });
    const response = await fetch(`${target.url}/public/v1/api/execute`, {
      method: "POST",
      headers: { authorization: `Bearer ${api_key}`, "content-type": "text/plain" },
      body: '{"payload":"hi"}',
    });
    expect(response.status).toBe(415);
  });
});

describe("express: streaming", () => {
  it("stops pulling the service's stream while the client does not read (back-pressure)", async () => {
    const probe = streamingProbe();
    const app = express();
    app.use(express.json());
    mountChannelkit(app, probe.service, { path: "/x" });
    const server = await listenOnFreePort(createServer(app));
    running.push(server);
    await probe.expectBackPressure(`${server.url}/x/probe/stream`);
  });
});
