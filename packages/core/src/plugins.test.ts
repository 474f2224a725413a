import { describe, expect, it } from "vitest";
import { z } from "zod";
import { authenticateApiKey, createChannelService, definePlugin, defineRoute, runToEnd, ServiceError } from "./index.js";
import { echoFlow } from "./flows/demo.js";
import { memoryStorage } from "./storage/memory.js";

/** The plugin of docs/architecture.md, as written there. */
const shout = defineRoute({
  method: "POST",
  path: "/shout",
  auth: "channelKey",
  query: z.object({ q: z.string().default("") }),
  doc: {
    operationId: "shout",
    summary: "Run the channel's flow on `q` and answer its reply in capitals",
    tag: { name: "Shout", description: "The shout channel of docs/architecture.md." },
    responses: { 200: { description: "The flow's reply, in capitals." } },
    errors: ["missing_api_key", "invalid_api_key"],
  },
  async handle(call, ctx) {
    const { channel } = await authenticateApiKey(call.request, ctx.storage, new Date());
    const flow = ctx.flows.get(channel.flowName);
    if (!flow) throw new ServiceError("runtime_error");
    const run = await ctx.runs.start({ channel, flow, conversation: null, payload: call.query().q, metadata: {}, request: call.request, live: false });
    const outcome = await runToEnd(run);
    return Response.json({
      reply: outcome.produced
        .map((m) => m.content)
        .join("")
        .toUpperCase(),
    });
  },
});

function shoutChannel() {
  return definePlugin({ id: "shout", routes: [shout] });
}

describe("a plugin's route", () => {
  it("authenticates by channel key and runs the channel's flow through ctx.runs.start, stored like any run", async () => {
    const storage = memoryStorage();
    const service = await createChannelService({ storage, flows: [echoFlow], plugins: [shoutChannel()], secretKey: "ab".repeat(32) });
    try {
      const { tenant } = await service.admin.createTenant({ name: "Plugins" });
      const { api_key: key, channel } = await service.admin.createChannel({ tenantId: tenant.id, flow: "echo" });
      const response = await service.handler(new Request("http://host.test/shout?q=hello", { method: "POST", headers: { authorization: `Bearer ${key}` } }));
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ reply: "ECHO: HELLO" });
      const refused = await service.handler(new Request("http://host.test/shout?q=hello", { method: "POST" }));
      expect(refused.status).toBe(401);
      expect(await refused.json()).toMatchObject({ error: { code: "missing_api_key" } });
      expect(channel.id).toBeTypeOf("string");
    } finally {
      await service.close();
    }
  });
});
