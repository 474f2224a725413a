import { describe, expect, it } from "vitest";
import { demoFlows } from "./flows/demo.js";
import type { IncomingRequest } from "./adapter.js";
import { type ChannelPlugin, definePlugin, defineRoute, type OperationDoc } from "./index.js";
import type { RouteRequest } from "./plugins.js";
import { createChannelService } from "./service.js";
import { memoryStorage } from "./storage/memory.js";

const quiet = { warn() {}, error() {} };

/** The OpenAPI operation of a test route. */
const doc = (operationId: string): OperationDoc => ({
  operationId,
  summary: "A test route.",
  tag: { name: "Test", description: "A test plugin." },
  responses: { 200: { description: "The route's answer." } },
  errors: [],
});

describe("service.routes", () => {
  it("lists every route the handler answers, plugins' included, under the basePath", async () => {
    const plugin: ChannelPlugin = {
      id: "ping",
      routes: [defineRoute({ method: "GET", path: "/ping", auth: "none", doc: doc("ping"), handle: () => new Response("pong") })],
    };
    const service = await createChannelService({ storage: memoryStorage(), flows: demoFlows, logger: quiet, basePath: "/chat/", plugins: [plugin] });
    try {
      expect(service.routes).toEqual([
        { method: "POST", path: "/chat/public/v1/api/execute" },
        { method: "GET", path: "/chat/public/v1/api/conversations/:session_id/messages" },
        { method: "GET", path: "/chat/public/v1/api/conversations/:session_id/events" },
        { method: "POST", path: "/chat/public/v1/api/conversations/:session_id/livechat/cancel" },
        { method: "GET", path: "/chat/public/v1/api/conversations/:session_id/stream" },
        { method: "POST", path: "/chat/public/v1/api/conversations/:session_id/cancel" },
        { method: "POST", path: "/chat/channels/webhook/:client_id/startConversation" },
        { method: "POST", path: "/chat/channels/webhook/:client_id/newMessage" },
        { method: "GET", path: "/chat/public/widget/config" },
        { method: "POST", path: "/chat/public/widget/chat" },
        { method: "GET", path: "/chat/public/widget/chat/:chat_id/stream" },
        { method: "POST", path: "/chat/public/widget/chat/:chat_id/cancel" },
        { method: "GET", path: "/chat/ping" },
        { method: "GET", path: "/chat/public/v1/openapi.json" },
        { method: "GET", path: "/chat/healthz" },
        { method: "GET", path: "/chat/readyz" },
        // The derived preflights, one per path of a route with `cors`, after the routes.
        { method: "OPTIONS", path: "/chat/public/v1/api/execute" },
        { method: "OPTIONS", path: "/chat/public/v1/api/conversations/:session_id/messages" },
        { method: "OPTIONS", path: "/chat/public/v1/api/conversations/:session_id/events" },
        { method: "OPTIONS", path: "/chat/public/v1/api/conversations/:session_id/livechat/cancel" },
        { method: "OPTIONS", path: "/chat/public/v1/api/conversations/:session_id/stream" },
        { method: "OPTIONS", path: "/chat/public/v1/api/conversations/:session_id/cancel" },
        { method: "OPTIONS", path: "/chat/channels/webhook/:client_id/startConversation" },
        { method: "OPTIONS", path: "/chat/channels/webhook/:client_id/newMessage" },
        { method: "OPTIONS", path: "/chat/public/widget/config" },
        { method: "OPTIONS", path: "/chat/public/widget/chat" },
        { method: "OPTIONS", path: "/chat/public/widget/chat/:chat_id/stream" },
        { method: "OPTIONS", path: "/chat/public/widget/chat/:chat_id/cancel" },
      ]);
      expect(Object.isFrozen(service.routes)).toBe(true);
      const answered = await service.handler(new Request("http://host.test/chat/ping"));
      expect(await answered.text()).toBe("pong");
    } finally {
      await service.close();
    }
  });
});

describe("a plugin's route", () => {
  // A route is handed a Web Request through `handler`, an adapter's own request through
  // `dispatch`: both must be RouteRequests (checked by the compiler).
  const asRouteRequest = (request: Request | IncomingRequest): RouteRequest => request;

  const plugin = definePlugin({
    id: "echo-body",
    routes: [
      defineRoute({
        method: "POST",
        path: "/echo/:name",
        auth: "none",
        doc: doc("echoBody"),
        async handle({ request, params }) {
          const body = new TextDecoder().decode(await request.arrayBuffer());
          return Response.json({ name: params.name, body, type: request.headers.get("content-type") }, { status: 201 });
        },
      }),
    ],
  });

  it("answers a Web Response, through handler and through dispatch", async () => {
    expect(asRouteRequest).toBeTypeOf("function");
    const service = await createChannelService({ storage: memoryStorage(), flows: demoFlows, logger: quiet, plugins: [plugin] });
    try {
      const init = { method: "POST", headers: { "content-type": "text/plain" }, body: "hi" };
      const answered = await service.handler(new Request("http://host.test/echo/a", init));
      expect(answered.status).toBe(201);
      expect(await answered.json()).toEqual({ name: "a", body: "hi", type: "text/plain" });

      const reply = await service.dispatch(new Request("http://host.test/echo/b", init));
      expect(reply.status).toBe(201);
      expect(reply.headers["content-type"]).toBe("application/json");
    } finally {
      await service.close();
    }
  });
});

describe("createChannelService options", () => {
  it("refuses a turnPollMaxMs that is not a number of milliseconds, 2 or more", async () => {
    for (const bad of [0, 1, -5, Number.NaN, Number.POSITIVE_INFINITY, "100" as unknown as number]) {
      await expect(createChannelService({ storage: memoryStorage(), flows: demoFlows, logger: quiet, turnPollMaxMs: bad })).rejects.toThrow(
        /turnPollMaxMs is a number of milliseconds, 2 or more/,
      );
    }
    const service = await createChannelService({ storage: memoryStorage(), flows: demoFlows, logger: quiet, turnPollMaxMs: 2 });
    await service.close();
  });
});
