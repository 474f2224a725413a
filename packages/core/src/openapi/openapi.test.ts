import { coreOpenApiDocument, OpenApiConformance } from "@channelkit/testkit";
import { Validator } from "@seriousme/openapi-schema-validator";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { adminApi } from "../admin/routes/plugin.js";
import { signRequestBody } from "../auth/signature.js";
import { apiChannel } from "../channels/api/plugin.js";
import { webhookChannel } from "../channels/webhook/plugin.js";
import { widgetChannel } from "../channels/widget/plugin.js";
import { demoFlows } from "../flows/demo.js";
import { ERROR_CODES } from "../http/errors.js";
import { liveChatWebhookBridge } from "../livechat/bridge/plugin.js";
import { liveChatInbox } from "../livechat/inbox/plugin.js";
import type { ChannelPlugin } from "../plugin/plugin.js";
import { defineRoute } from "../plugin/route.js";
import { createChannelService } from "../service.js";
import { memoryStorage } from "../storage/memory.js";
import { type OpenApiDocument, openApiDocument, routeKey } from "./document.js";
import { OPENAPI_PATH, openApiPlugin } from "./route.js";
import { healthPlugin } from "../health/route.js";

const quiet = { warn() {}, error() {} };
const ADMIN_SECRET = "an-admin-secret-of-at-least-32-characters";

/** A service with the plugins of channelkit's own routes, and what it mounts. */
async function serviceWith(livechat: "inbox" | "bridge", options: { basePath?: string; openapi?: boolean } = {}) {
  return createChannelService({
    storage: memoryStorage(),
    flows: demoFlows,
    logger: quiet,
    plugins: [adminApi({ secret: ADMIN_SECRET })],
    livechat:
      livechat === "inbox"
        ? liveChatInbox({ secret: ADMIN_SECRET })
        : liveChatWebhookBridge({ url: "http://desk.test/", secret: "a-bridge-secret-0123456789" }),
    ...options,
  });
}

/** The operations of a document, as `METHOD /path/{name}`. */
function operationKeys(document: OpenApiDocument): string[] {
  return Object.entries(document.paths).flatMap(([path, item]) => Object.keys(item).map((method) => routeKey(method, path)));
}

/** The document of every route of @channelkit/core and its plugins (docs/openapi.json but the widget's script, checked in test/openapi.test.ts). */
describe("the OpenAPI document", () => {
  const document = coreOpenApiDocument();

  it("is a valid OpenAPI 3.1 document (@seriousme/openapi-schema-validator, against the OpenAPI 3.1 schema)", async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(document) as unknown as Parameters<Validator["validate"]>[0]);
    expect(result.errors, JSON.stringify(result.errors, null, 2)).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
  });

  it("holds JSON Schemas of draft 2020-12 that Ajv compiles in strict mode, each $ref resolved", () => {
    const ajv = new Ajv2020({ strict: true, allErrors: true, discriminator: true });
    addFormats(ajv);
    // The document's non-schema keywords, which a JSON Schema validator meets beside the schemas.
    ajv.addVocabulary(["openapi", "info", "servers", "tags", "paths", "components", "x-channelkit-plugin"]);
    ajv.addSchema(document, "openapi.json");
    const pointers: string[] = [];
    const walk = (value: unknown, pointer: string) => {
      if (typeof value !== "object" || value === null) return;
      for (const [key, item] of Object.entries(value)) {
        const at = `${pointer}/${key.replace(/~/g, "~0").replace(/\//g, "~1")}`;
        if (key === "schema" && typeof item === "object") pointers.push(at);
        else walk(item, at);
      }
    };
    walk(document.paths, "#/paths");
    for (const name of Object.keys(document.components.schemas)) pointers.push(`#/components/schemas/${name}`);
    expect(pointers.length).toBeGreaterThan(100);
    for (const pointer of pointers) expect(ajv.getSchema(`openapi.json${pointer}`), pointer).toBeTypeOf("function");
  });

  it("describes every route a service of channelkit's plugins mounts, its derived preflights included, and no other", async () => {
    const described = new Set(operationKeys(document));
    const mounted = new Set<string>();
    for (const livechat of ["inbox", "bridge"] as const) {
      const service = await serviceWith(livechat);
      for (const route of service.routes) mounted.add(routeKey(route.method, route.path));
      await service.close();
    }
    expect(
      [...mounted].filter((route) => !described.has(route)),
      "routes the document lacks",
    ).toEqual([]);
    expect(
      [...described].filter((route) => !mounted.has(route)),
      "operations of no route",
    ).toEqual([]);
  });

  it("names each operation once", () => {
    const ids = Object.values(document.paths).flatMap((item) => Object.values(item).map((operation) => (operation as { operationId: string }).operationId));
    expect(ids.length).toBeGreaterThan(40);
    expect(ids.filter((id, index) => ids.indexOf(id) !== index)).toEqual([]);
  });

  it("lists each error code under its own status, and every status an operation answers", () => {
    for (const [path, item] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(item) as [string, { responses: Record<string, any> }][]) {
        for (const [status, response] of Object.entries(operation.responses)) {
          const codes: string[] = response.content?.["application/json"]?.schema?.allOf?.[1]?.properties?.error?.properties?.code?.enum ?? [];
          for (const code of codes) expect(ERROR_CODES[code as keyof typeof ERROR_CODES].status, `${method} ${path} ${code}`).toBe(Number(status));
        }
        if (method !== "options") expect(Object.keys(operation.responses), `${method} ${path}`).toContain("500");
      }
    }
    const execute = document.paths["/public/v1/api/execute"]?.post as { responses: object };
    expect(Object.keys(execute.responses)).toEqual(
      expect.arrayContaining(["200", "400", "401", "403", "404", "409", "410", "413", "415", "422", "429", "500", "503"]),
    );
  });
});

describe("answers the fuzzer found the document wrong about", () => {
  it("an audit event names the channel and tenant as the refused call named them, UUIDs or not", async () => {
    const service = await createChannelService({ storage: memoryStorage(), flows: demoFlows, logger: quiet, plugins: [adminApi({ development: true })] });
    try {
      const { tenant } = await service.admin.createTenant({ name: "audit" });
      const headers = { "x-tenant-id": tenant.id };
      const refused = await service.handler(new Request("http://host.test/api/v1/channels/not-a-uuid/rotate-key", { method: "POST", headers }));
      expect(refused.status).toBe(404);
      const page = await (await service.handler(new Request("http://host.test/api/v1/audit", { headers }))).json();
      expect(page.events.map((event: { channel_id: string }) => event.channel_id)).toContain("not-a-uuid");
      const ajv = new Ajv2020({ strict: false, allErrors: true, discriminator: true });
      addFormats(ajv);
      ajv.addSchema(coreOpenApiDocument(), "openapi.json");
      const validate = ajv.getSchema("openapi.json#/paths/~1api~1v1~1audit/get/responses/200/content/application~1json/schema");
      expect(validate?.(page), ajv.errorsText(validate?.errors)).toBe(true);
    } finally {
      await service.close();
    }
  });
});

describe("the routes the contract suite does not call", () => {
  it("the bridge's answers conform: each event, an unsigned one, a bad one", async () => {
    const secret = "a-bridge-secret-0123456789";
    const service = await createChannelService({
      storage: memoryStorage(),
      flows: demoFlows,
      logger: quiet,
      livechat: liveChatWebhookBridge({ url: "http://desk.test/", secret, fetch: async () => new Response(null, { status: 200 }) }),
    });
    const checker = new OpenApiConformance();
    const violations: string[] = [];
    const post = async (body: unknown, sign = true) => {
      const text = JSON.stringify(body);
      const headers: Record<string, string> = { "content-type": "application/json", origin: "https://desk.test" };
      if (sign) headers["x-channelkit-signature"] = await signRequestBody(secret, text);
      const response = await service.handler(new Request("http://host.test/api/v1/livechat/bridge/events", { method: "POST", headers, body: text }));
      await checker.inspect("POST", "/api/v1/livechat/bridge/events", response, (violation) => violations.push(violation));
      return response.status;
    };
    try {
      const { tenant } = await service.admin.createTenant({ name: "desk" });
      const { api_key } = await service.admin.createChannel({ tenantId: tenant.id, flow: "handover" });
      const executed = await service.handler(
        new Request("http://host.test/public/v1/api/execute", {
          method: "POST",
          headers: { authorization: `Bearer ${api_key}`, "content-type": "application/json" },
          body: JSON.stringify({ payload: "a human, please" }),
        }),
      );
      const { conversation_id } = (await executed.json()) as { conversation_id: string };
      expect(await post({ type: "agent_joined", conversation_id, livechat_conversation_id: "desk-1" })).toBe(200);
      expect(await post({ type: "agent_message", conversation_id, message: { content: "Hello, Ada here", id: "m-1" } })).toBe(200);
      expect(await post({ type: "closed", conversation_id })).toBe(200);
      expect(await post({ type: "closed", conversation_id })).toBe(409);
      expect(await post({ type: "unavailable", conversation_id: "nobody" })).toBe(404);
      expect(await post({ type: "agent_joined" })).toBe(422);
      expect(await post({ type: "closed", conversation_id }, false)).toBe(401);
      expect(violations).toEqual([]);
    } finally {
      await service.close();
    }
  });
});

describe("GET /public/v1/openapi.json", () => {
  it("answers the document of the routes the service mounts, its basePath as the server", async () => {
    const service = await serviceWith("inbox", { basePath: "/chat" });
    try {
      const response = await service.handler(new Request(`http://host.test/chat${OPENAPI_PATH}`, { headers: { origin: "https://app.test" } }));
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toBe("application/json; charset=utf-8");
      expect(response.headers.get("access-control-allow-origin")).toBe("https://app.test");
      const served = (await response.json()) as OpenApiDocument;
      // The plugins in the order the service mounts them: its channels, its live chat, its plugins, the document's route, the probes.
      const health = healthPlugin({ storage: memoryStorage(), plugins: () => [], closing: () => false });
      const plugins = [apiChannel(), webhookChannel(), widgetChannel(), liveChatInbox(), adminApi(), openApiPlugin(() => served), health];
      expect(served).toEqual(JSON.parse(JSON.stringify(openApiDocument({ plugins, basePath: "/chat" }))));
      // Each route of the service is an operation of it, and each operation a route.
      expect(operationKeys(served).sort()).toEqual(service.routes.map((route) => routeKey(route.method, route.path.slice("/chat".length))).sort());
      expect(served.servers).toEqual([{ url: "/chat", description: "The service's basePath" }]);
      expect(Object.keys(served.paths)).toContain("/api/v1/livechat/feed");
      expect(Object.keys(served.paths)).not.toContain("/api/v1/livechat/bridge/events");
      expect(Object.keys(served.paths)).toContain(OPENAPI_PATH);
      // Made once: the same text on every request.
      const again = await service.handler(new Request(`http://host.test/chat${OPENAPI_PATH}`));
      expect(await again.json()).toEqual(served);
    } finally {
      await service.close();
    }
  });

  it("is a 404 like any unknown path with openapi: false", async () => {
    const service = await serviceWith("bridge", { openapi: false });
    try {
      expect(service.routes.map((route) => route.path)).not.toContain(OPENAPI_PATH);
      const response = await service.handler(new Request(`http://host.test${OPENAPI_PATH}`));
      expect(response.status).toBe(404);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe("not_found");
    } finally {
      await service.close();
    }
  });
});

describe("a plugin's routes in the served document", () => {
  const echo: ChannelPlugin = {
    id: "echo",
    routes: [
      defineRoute({
        method: "GET",
        path: "/echo/:name" as const,
        auth: { schemes: { echoToken: { type: "apiKey", in: "header", name: "X-Echo-Token" } } },
        cors: { headers: ["X-Echo-Token"] },
        query: z.object({ loud: z.enum(["yes", "no"]).optional().meta({ description: "Whether to shout." }) }),
        doc: {
          operationId: "echoName",
          summary: "Echo a name",
          tag: { name: "Echo", description: "A plugin's own routes." },
          parameters: [{ name: "name", in: "path", required: true, description: "What to echo." }],
          responses: { 200: { description: "The name.", json: z.object({ name: z.string() }) } },
          errors: ["validation_error"],
        },
        handle: (call) => Response.json({ name: call.query().loud === "yes" ? call.params.name.toUpperCase() : call.params.name }),
      }),
    ],
  };

  it("describes it at GET /public/v1/openapi.json, marked with its plugin, with its tag, scheme, query, answer and preflight, and answers as it says", async () => {
    const service = await createChannelService({ storage: memoryStorage(), flows: demoFlows, logger: quiet, plugins: [echo] });
    try {
      const served = (await (await service.handler(new Request(`http://host.test${OPENAPI_PATH}`))).json()) as OpenApiDocument;
      const item = served.paths["/echo/{name}"] as Record<string, Record<string, any>>;
      expect(Object.keys(item)).toEqual(["options", "get"]);
      expect(item.get?.operationId).toBe("echoName");
      expect(item.get?.["x-channelkit-plugin"]).toBe("echo");
      expect(item.get?.tags).toEqual(["Echo"]);
      expect(item.get?.security).toEqual([{ echoToken: [] }]);
      expect(
        item.get?.parameters.map((parameter: { name: string; in: string; description: string }) => [parameter.name, parameter.in, parameter.description]),
      ).toEqual([
        ["name", "path", "What to echo."],
        ["loud", "query", "Whether to shout."],
      ]);
      expect(item.options?.operationId).toBe("preflightEchoName");
      expect(item.options?.["x-channelkit-plugin"]).toBe("echo");
      expect(served.tags).toContainEqual({ name: "Echo", description: "A plugin's own routes." });
      expect(served.components.securitySchemes.echoToken).toEqual({ type: "apiKey", in: "header", name: "X-Echo-Token" });
      // Not a route of the document of channelkit's own.
      expect(coreOpenApiDocument().paths["/echo/{name}"]).toBeUndefined();

      const checker = new OpenApiConformance(served);
      const violations: string[] = [];
      const check = async (method: string, path: string, init: RequestInit = {}) => {
        const response = await service.handler(new Request(`http://host.test${path}`, { method, ...init }));
        await checker.inspect(method, path, response.clone(), (violation) => violations.push(violation));
        return response;
      };
      expect(await (await check("GET", "/echo/ada?loud=yes")).json()).toEqual({ name: "ADA" });
      expect((await check("GET", "/echo/ada?loud=maybe")).status).toBe(422);
      const preflight = await check("OPTIONS", "/echo/ada", { headers: { origin: "https://app.test", "access-control-request-method": "GET" } });
      expect(preflight.status).toBe(204);
      expect(preflight.headers.get("access-control-allow-methods")).toBe("GET, OPTIONS");
      expect(preflight.headers.get("access-control-allow-headers")).toBe("X-Echo-Token");
      expect(violations).toEqual([]);
    } finally {
      await service.close();
    }
  });
});

describe("the preflights derived from the routes' cors", () => {
  /** What each path's OPTIONS answered when the plugins wrote their preflights by hand: methods, then headers. */
  const ANSWERED: Record<string, [string, string]> = {
    "/public/v1/api/execute": ["POST, OPTIONS", "Authorization, Content-Type"],
    "/public/v1/api/conversations/x/messages": ["GET, OPTIONS", "Authorization, Content-Type"],
    "/public/v1/api/conversations/x/events": ["GET, OPTIONS", "Authorization, Content-Type, Last-Event-ID"],
    "/public/v1/api/conversations/x/livechat/cancel": ["POST, OPTIONS", "Authorization, Content-Type, X-Service-Signature"],
    "/public/v1/api/conversations/x/stream": ["GET, OPTIONS", "Authorization, Content-Type"],
    "/public/v1/api/conversations/x/cancel": ["POST, OPTIONS", "Authorization, Content-Type, X-Service-Signature"],
    "/public/widget/config": ["GET, OPTIONS", "Authorization, Content-Type"],
    "/public/widget/chat": ["POST, OPTIONS", "Authorization, Content-Type, X-Service-Signature"],
    "/public/widget/chat/x/stream": ["GET, OPTIONS", "Authorization, Content-Type"],
    "/public/widget/chat/x/cancel": ["POST, OPTIONS", "Authorization, Content-Type, X-Service-Signature"],
    "/channels/webhook/x/startConversation": ["POST, OPTIONS", "Content-Type, X-Service-Signature"],
    "/channels/webhook/x/newMessage": ["POST, OPTIONS", "Content-Type, X-Service-Signature, Idempotency-Key"],
    "/api/v1/channels/x": ["GET, PATCH, OPTIONS", "Authorization, Content-Type, X-Tenant-ID"],
    "/api/v1/channels/x/rotate-key": ["POST, OPTIONS", "Authorization, Content-Type, X-Tenant-ID"],
    "/api/v1/channels/x/rotate-signing-secret": ["POST, OPTIONS", "Authorization, Content-Type, X-Tenant-ID"],
    "/api/v1/audit": ["GET, OPTIONS", "Authorization, Content-Type, X-Tenant-ID"],
    "/api/v1/conversations": ["GET, OPTIONS", "Authorization, Content-Type, X-Tenant-ID"],
    "/api/v1/export/conversations": ["GET, OPTIONS", "Authorization, Content-Type, X-Tenant-ID"],
    "/api/v1/conversations/x": ["DELETE, OPTIONS", "Authorization, Content-Type, X-Tenant-ID"],
    "/api/v1/end-users/erase": ["POST, OPTIONS", "Authorization, Content-Type, X-Tenant-ID"],
    "/api/v1/livechat/conversations": ["GET, OPTIONS", "Authorization, Content-Type, X-Tenant-ID, Last-Event-ID"],
    "/api/v1/livechat/conversations/x": ["GET, OPTIONS", "Authorization, Content-Type, X-Tenant-ID, Last-Event-ID"],
    "/api/v1/livechat/conversations/x/accept": ["POST, OPTIONS", "Authorization, Content-Type, X-Tenant-ID, Last-Event-ID"],
    "/api/v1/livechat/conversations/x/messages": ["POST, OPTIONS", "Authorization, Content-Type, X-Tenant-ID, Last-Event-ID"],
    "/api/v1/livechat/conversations/x/close": ["POST, OPTIONS", "Authorization, Content-Type, X-Tenant-ID, Last-Event-ID"],
    "/api/v1/livechat/feed": ["GET, OPTIONS", "Authorization, Content-Type, X-Tenant-ID, Last-Event-ID"],
  };

  it("answer each path as its hand-written preflight did, as the document says, and no path else has one", async () => {
    const checker = new OpenApiConformance();
    const violations: string[] = [];
    for (const livechat of ["inbox", "bridge"] as const) {
      const service = await serviceWith(livechat);
      try {
        const preflighted = service.routes.filter((route) => route.method === "OPTIONS").map((route) => route.path.replace(/:[^/]+/g, "x"));
        const expected = Object.keys(ANSWERED).filter((path) => livechat === "inbox" || !path.startsWith("/api/v1/livechat/"));
        expect(preflighted.sort()).toEqual(expected.sort());
        for (const path of expected) {
          const [methods, headers] = ANSWERED[path] as [string, string];
          const response = await service.handler(
            new Request(`http://host.test${path}`, { method: "OPTIONS", headers: { origin: "https://app.test", "access-control-request-method": "POST" } }),
          );
          await checker.inspect("OPTIONS", path, response.clone(), (violation) => violations.push(violation));
          expect(response.status, path).toBe(204);
          expect(response.headers.get("access-control-allow-methods"), path).toBe(methods);
          expect(response.headers.get("access-control-allow-headers"), path).toBe(headers);
          expect(response.headers.get("access-control-max-age"), path).toBe("600");
          expect(response.headers.get("access-control-allow-origin"), path).toBe("https://app.test");
          expect(response.headers.get("access-control-allow-credentials"), path).toBeNull();
        }
        // The bridge's receiver is a server: no preflight.
        const bridge = await service.handler(new Request("http://host.test/api/v1/livechat/bridge/events", { method: "OPTIONS" }));
        expect(bridge.status).toBe(livechat === "bridge" ? 405 : 404);
      } finally {
        await service.close();
      }
    }
    expect(violations).toEqual([]);
  });
});
