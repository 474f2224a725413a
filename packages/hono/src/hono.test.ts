import type { Server } from "node:http";
import { createAdaptorServer } from "@hono/node-server";
import type { ChannelService } from "@channelkit/core";
import {
  expectExactSignedBody,
  expectPrefixBoundary,
  listenOnFreePort,
  pingPlugin,
  type ServiceTargetOptions,
  serviceTarget,
  sqliteTestStore,
  streamingProbe,
  UNUSUAL_SIGNED_BODY,
} from "@channelkit/testkit";
import { Hono } from "hono";
import { afterEach, describe, expect, it } from "vitest";
import { channelkit } from "./index.js";

const running: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((item) => item.close()));
});

type BodyReader = "json" | "text" | "arrayBuffer" | "none";
type HostApp = Hono<{ Variables: { seen: unknown } }>;

/**
 * A host app: a middleware that reads every JSON body through Hono (as a logger or a
 * validator would) before channelkit runs, its own routes and notFound; channelkit under `prefix`.
 */
function hostApp(service: Pick<ChannelService, "handler" | "routes">, prefix: string, reader: BodyReader = "json"): HostApp {
  const app: HostApp = new Hono();
  app.use(async (c, next) => {
    if (reader !== "none" && c.req.header("content-type")?.startsWith("application/json")) {
      c.set("seen", await c.req[reader]().catch(() => "unparsable"));
    }
    await next();
  });
  app.get("/health", (c) => c.text("ok"));
  app.post("/orders", (c) => c.json({ received: c.get("seen") }));
  app.notFound((c) => c.json({ host: "not found" }, 404));
  app.onError((error, c) => c.json({ host: "error", message: error.message }, 500));
  app.route(prefix, channelkit(service));
  return app;
}

/** A service on a fresh SQLite store and the host app around it, with no server at all. */
async function startApp(prefix: string, reader: BodyReader = "json") {
  let app: HostApp | undefined;
  const target = serviceTarget({
    name: "hono",
    store: sqliteTestStore,
    listen: async (service) => {
      app = hostApp(service, prefix, reader);
      return { url: `http://channelkit.test${prefix}`, close: async () => undefined };
    },
  });
  const started = await target.start({});
  running.push(started);
  return { ...started, app: app as HostApp };
}

/** The same, served by @hono/node-server on a free port. */
async function startServer(prefix: string, reader: BodyReader = "json", serviceOptions?: ServiceTargetOptions["service"]) {
  let origin = "";
  const target = serviceTarget({
    name: "hono",
    store: sqliteTestStore,
    ...(serviceOptions ? { service: serviceOptions } : {}),
    listen: async (service) => {
      const server = await listenOnFreePort(createAdaptorServer({ fetch: hostApp(service, prefix, reader).fetch }) as Server);
      origin = server.url;
      return { ...server, url: server.url + prefix };
    },
  });
  const started = await target.start({});
  running.push(started);
  return { ...started, origin };
}

async function echoChannel(admin: ChannelService["admin"]): Promise<string> {
  const { tenant } = await admin.createTenant({ name: "host" });
  return (await admin.createChannel({ tenantId: tenant.id, flow: "echo" })).api_key;
}

function executeRequest(url: string, key: string, body: unknown): Request {
  return new Request(`${url}/public/v1/api/execute`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

describe("hono on @hono/node-server: mounted among the host's routes", () => {
  it.each(["/chat", ""])("under %j: host routes, the host middleware and notFound keep working", async (prefix) => {
    const target = await startServer(prefix);
    expect(await (await fetch(`${target.origin}/health`)).text()).toBe("ok");
    const order = await fetch(`${target.origin}/orders`, { method: "POST", headers: { "content-type": "application/json" }, body: '{"id":7}' });
    expect(await order.json()).toEqual({ received: { id: 7 } });

    const run = await fetch(executeRequest(target.url, await echoChannel(target.admin), { payload: "hi" }));
    expect(run.status).toBe(200);
    expect(((await run.json()) as { output: { messages: { content: string }[] } }).output.messages[0]?.content).toBe("Echo: hi");
    expect((await fetch(`${target.url}/public/v1/api/execute`, { method: "DELETE" })).status).toBe(405);

    for (const path of ["/nope", `${prefix}/nope`, `${prefix}/public/v1/api`]) {
      const response = await fetch(target.origin + path, { method: "POST" });
      expect([path, response.status, await response.json()]).toEqual([path, 404, { host: "not found" }]);
    }
  });
});

describe("hono on @hono/node-server: a prefix ends at a path-segment boundary", () => {
  it.each([
    ["app.route('/chat')", "/chat", undefined, "/chat"],
    ["basePath /chat, app.route('/')", "/", "/chat", "/chat"],
    ["basePath /chat under app.route('/api')", "/api", "/chat", "/api/chat"],
  ] as const)("%s: /chatping-style paths get the host's notFound", async (_name, mountPrefix, basePath, prefix) => {
    const target = await startServer(mountPrefix, "json", { plugins: [pingPlugin], ...(basePath ? { basePath } : {}) });
    await expectPrefixBoundary({ origin: target.origin, prefix, admin: target.admin });
  });
});

describe("hono: the exact raw body after a host middleware read it", () => {
  it.each(["json", "text", "arrayBuffer", "none"] as const)("c.req.%s() before channelkit: signatures verify over the raw bytes", async (reader) => {
    await expectExactSignedBody(await startServer("/chat", reader));
  });

  it("a body read straight from c.req.raw is reported, never rebuilt", async () => {
    const target = await startApp("");
    const app = new Hono();
    app.use(async (c, next) => {
      await c.req.raw.text();
      await next();
    });
    app.onError((error, c) => c.json({ message: error.message }, 500));
    app.route("/", target.app);
    const response = await app.fetch(executeRequest("http://channelkit.test", await echoChannel(target.admin), { payload: "hi" }));
    expect(response.status).toBe(500);
    expect(((await response.json()) as { message: string }).message).toContain("already consumed");
  });
});

describe("hono as a plain fetch handler (Bun, Deno, Workers)", () => {
  it.each(["/chat", ""])("app.fetch(new Request(...)) under %j answers execute, JSON and streamed, with no server", async (prefix) => {
    const target = await startApp(prefix);
    const key = await echoChannel(target.admin);
    const json = await target.app.fetch(executeRequest(target.url, key, { payload: "no server" }));
    expect(json.status).toBe(200);
    const run = (await json.json()) as { status: string; output: { result: unknown } };
    expect(run.status).toBe("success");
    expect(run.output.result).toEqual({ echo: "no server", turn: 1 });

    const streamed = await target.app.fetch(executeRequest(target.url, key, { payload: "no server", stream: true }));
    expect(streamed.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const text = await streamed.text();
    expect(text).toContain('"type":"finish"');

    expect((await target.app.fetch(new Request("http://channelkit.test/elsewhere"))).status).toBe(404);
  });

  it("a signed body passes through app.fetch byte for byte", async () => {
    const target = await startApp("/chat", "none");
    const { tenant } = await target.admin.createTenant({ name: "host" });
    const created = await target.admin.createChannel({ tenantId: tenant.id, flow: "echo", requireSignature: true });
    const { signRequestBody } = await import("@channelkit/core");
    const response = await target.app.fetch(
      new Request(`${target.url}/public/v1/api/execute`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${created.api_key}`,
          "content-type": "application/json",
          "x-service-signature": await signRequestBody(created.signing_secret as string, UNUSUAL_SIGNED_BODY),
        },
        body: UNUSUAL_SIGNED_BODY,
      }),
    );
    expect(response.status, await response.clone().text()).toBe(200);
  });
});

describe("hono: streaming", () => {
  it("stops pulling the service's stream while the client does not read (back-pressure)", async () => {
    const probe = streamingProbe();
    const server = await listenOnFreePort(createAdaptorServer({ fetch: hostApp(probe.service, "/x").fetch }) as Server);
    running.push(server);
    await probe.expectBackPressure(`${server.url}/x/probe/stream`);
  });
});
