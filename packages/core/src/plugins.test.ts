import { describe, expect, it } from "vitest";
import { authenticateApiKey, type ChannelPlugin, createChannelService, ServiceError, startRun } from "./index.js";
import { echoFlow } from "./flows/demo.js";
import { memoryStorage } from "./storage/memory.js";

/** The plugin of docs/architecture.md, as written there. */
function shoutChannel(): ChannelPlugin {
  return {
    name: "shout",
    routes: [
      {
        method: "POST",
        path: "/shout",
        async handle(request, _params, ctx) {
          const { channel } = await authenticateApiKey(request, ctx.storage, new Date());
          const flow = ctx.flows.get(channel.flowName);
          if (!flow) throw new ServiceError("runtime_error");
          const payload = new URL(request.url).searchParams.get("q") ?? "";
          const run = await startRun(ctx, { channel, flow, conversation: null, payload, metadata: {}, request, live: false });
          let step = await run.steps.next();
          while (!step.done) step = await run.steps.next();
          return Response.json({
            reply: step.value.produced
              .map((m) => m.content)
              .join("")
              .toUpperCase(),
          });
        },
      },
    ],
  };
}

describe("a plugin's route", () => {
  it("authenticates by channel key and runs the channel's flow through startRun, stored like any run", async () => {
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
