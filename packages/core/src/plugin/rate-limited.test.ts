import { describe, expect, it } from "vitest";
import { echoFlow } from "../flows/demo.js";
import { authenticateRequest, createChannelService, definePlugin, defineRoute, json, openApiDocument } from "../index.js";
import { memoryStorage } from "../storage/memory.js";

const TAG = { name: "Probe", description: "Routes that authenticate with a server key." };

/** Two routes that authenticate their caller alike; one is left out of the rate limits. */
const probe = definePlugin({
  id: "probe",
  routes: [
    defineRoute({
      method: "GET",
      path: "/probe/counted",
      auth: "channelKey",
      doc: {
        operationId: "probeCounted",
        summary: "Counted",
        tag: TAG,
        responses: { 200: { description: "OK." } },
        errors: ["invalid_api_key", "rate_limited"],
      },
      async handle({ request }, ctx) {
        await authenticateRequest(request, ctx);
        return json({ ok: true });
      },
    }),
    defineRoute({
      method: "GET",
      path: "/probe/free",
      auth: "channelKey",
      rateLimited: false,
      doc: { operationId: "probeFree", summary: "Not counted", tag: TAG, responses: { 200: { description: "OK." } }, errors: ["invalid_api_key"] },
      async handle({ request }, ctx) {
        await authenticateRequest(request, ctx);
        return json({ ok: true });
      },
    }),
  ],
});

async function probeService() {
  const service = await createChannelService({
    storage: memoryStorage(),
    flows: [echoFlow],
    plugins: [probe],
    secretKey: "ab".repeat(32),
    rateLimits: { serverKey: { requests: 2, windowSeconds: 60 }, failedAuth: { requests: 2, windowSeconds: 60 } },
  });
  const { tenant } = await service.admin.createTenant({ name: "Probe" });
  const { api_key: key } = await service.admin.createChannel({ tenantId: tenant.id, flow: "echo" });
  const get = (path: string, bearer = key) =>
    service.handler(new Request(`http://host.test${path}`, { headers: { authorization: `Bearer ${bearer}` } }), { clientAddress: "203.0.113.9" });
  return { service, get };
}

describe("a route's rateLimited", () => {
  it("counts a route's requests by default: the third of a 2-request limit is 429 rate_limited, each answer with its RateLimit headers", async () => {
    const { service, get } = await probeService();
    try {
      const answers = [await get("/probe/counted"), await get("/probe/counted"), await get("/probe/counted")];
      expect(answers.map((answer) => answer.status)).toEqual([200, 200, 429]);
      expect(answers[0]?.headers.get("ratelimit-policy")).toBe('"server_key";q=2;w=60');
      expect(((await answers[2]?.json()) as { error: { code: string } }).error.code).toBe("rate_limited");
    } finally {
      await service.close();
    }
  });

  it("false leaves the route's requests out: five with one key are answered, without RateLimit headers, while the counted route is refused", async () => {
    const { service, get } = await probeService();
    try {
      await get("/probe/counted");
      await get("/probe/counted");
      expect((await get("/probe/counted")).status).toBe(429);
      const free = await Promise.all(Array.from({ length: 5 }, () => get("/probe/free")));
      expect(free.map((answer) => answer.status)).toEqual([200, 200, 200, 200, 200]);
      expect(free.map((answer) => answer.headers.get("ratelimit-policy"))).toEqual([null, null, null, null, null]);
    } finally {
      await service.close();
    }
  });

  it("false still counts failed authentications: past the failedAuth limit a wrong key is 429", async () => {
    const { service, get } = await probeService();
    try {
      const answers = [await get("/probe/free", "svc_sk_wrong"), await get("/probe/free", "svc_sk_wrong"), await get("/probe/free", "svc_sk_wrong")];
      expect(answers.map((answer) => answer.status)).toEqual([401, 401, 429]);
    } finally {
      await service.close();
    }
  });

  it("the OpenAPI document says which routes are counted: 429 and the RateLimit headers on the counted route only", async () => {
    const document = openApiDocument({ plugins: [probe] }) as unknown as {
      paths: Record<string, { get: { responses: Record<string, { headers?: Record<string, unknown> }> } }>;
    };
    const counted = document.paths["/probe/counted"]?.get.responses;
    const free = document.paths["/probe/free"]?.get.responses;
    expect(Object.keys(counted?.["200"]?.headers ?? {})).toContain("RateLimit");
    expect(Object.keys(free?.["200"]?.headers ?? {})).not.toContain("RateLimit");
  });
});
