import { readFileSync } from "node:fs";
import { OpenApiConformance } from "@channelkit/testkit";
import { Validator } from "@seriousme/openapi-schema-validator";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { describe, expect, it } from "vitest";
import { adminApi } from "../admin/plugin.js";
import { signRequestBody } from "../auth/signature.js";
import { demoFlows } from "../flows/demo.js";
import { ERROR_CODES } from "../http/errors.js";
import { liveChatWebhookBridge } from "../livechat/bridge/plugin.js";
import { liveChatInbox } from "../livechat/inbox/plugin.js";
import { createChannelService } from "../service.js";
import { memoryStorage } from "../storage/memory.js";
import { openApiDocument, routeKey } from "./document.js";
import { OPENAPI_PATH, OPERATIONS } from "./operations.js";

const quiet = { warn() {}, error() {} };
const CHECKED_IN = new URL("../../../../docs/openapi.json", import.meta.url);

/** A service with the plugins of channelkit's own routes, and what it mounts. */
async function serviceWith(livechat: "inbox" | "bridge", options: { basePath?: string; openapi?: boolean } = {}) {
  return createChannelService({
    storage: memoryStorage(),
    flows: demoFlows,
    logger: quiet,
    plugins: [adminApi({ secret: "an-admin-secret-of-at-least-32-characters" })],
    livechat:
      livechat === "inbox"
        ? liveChatInbox({ secret: "an-admin-secret-of-at-least-32-characters" })
        : liveChatWebhookBridge({ url: "http://desk.test/", secret: "a-bridge-secret-0123456789" }),
    ...options,
  });
}

describe("the OpenAPI document", () => {
  const document = openApiDocument();

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

  it("is what docs/openapi.json holds", () => {
    const file = JSON.parse(readFileSync(CHECKED_IN, "utf8")) as unknown;
    expect(file, "docs/openapi.json is stale: run `npm run openapi` and commit docs/openapi.json").toEqual(JSON.parse(JSON.stringify(document)));
  });

  it("describes every route channelkit mounts, and no other", async () => {
    const described = new Set(OPERATIONS.map((operation) => routeKey(operation.method, operation.path)));
    const mounted = new Set<string>();
    for (const livechat of ["inbox", "bridge"] as const) {
      const service = await serviceWith(livechat);
      for (const route of service.routes) mounted.add(routeKey(route.method, route.path));
      await service.close();
    }
    // Mounted by @channelkit/widget's widgetAsset(), checked by its own tests.
    const widgetScript = ["GET /public/widget/widget.js", "HEAD /public/widget/widget.js"];
    expect(
      [...mounted].filter((route) => !described.has(route)),
      "routes the document lacks",
    ).toEqual([]);
    expect(
      [...described].filter((route) => !mounted.has(route) && !widgetScript.includes(route)),
      "operations of no route",
    ).toEqual([]);
  });

  it("names each operation once", () => {
    const ids = OPERATIONS.map((operation) => operation.operationId);
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
      ajv.addSchema(openApiDocument(), "openapi.json");
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
      const served = (await response.json()) as ReturnType<typeof openApiDocument>;
      expect(served).toEqual(
        JSON.parse(
          JSON.stringify(openApiDocument({ routes: service.routes.map((route) => ({ ...route, path: route.path.slice("/chat".length) })), basePath: "/chat" })),
        ),
      );
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
