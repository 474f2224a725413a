import { describe, expect, it } from "vitest";
import { demoFlows } from "../../flows/demo.js";
import type { ServiceInternals } from "../../context.js";
import { type ChannelPlugin, createChannelService, memoryStorage, type ServiceContext } from "../../index.js";

const quiet = { warn() {}, error() {} };

describe("the webhook channel under a flood of startConversation", () => {
  it("keeps nothing in the process per conversation: only the stored conversations grow", async () => {
    let context: ServiceContext | undefined;
    const probe: ChannelPlugin = {
      id: "probe",
      init(ctx) {
        context = ctx;
      },
    };
    const storage = memoryStorage();
    const service = await createChannelService({ storage, flows: demoFlows, logger: quiet, secretKey: "ef".repeat(32), plugins: [probe] });
    const { tenant } = await service.admin.createTenant({ name: "Flooded" });
    const { channel } = await service.admin.createChannel({ tenantId: tenant.id, flow: "echo", type: "webhook" });
    const url = `http://channelkit.test/channels/webhook/${channel.client_id}/startConversation`;
    const starts = Array.from({ length: 300 }, () =>
      service.handler(new Request(url, { method: "POST", headers: { "content-type": "application/json" }, body: '{"language":"en_US"}' })),
    );
    const answered = await Promise.all(starts);
    expect(answered.every((response) => response.status === 200)).toBe(true);
    const ids = await Promise.all(
      answered.map(async (response) => ((await response.json()) as { conversation: { conversation: { id: string } } }).conversation.conversation.id),
    );
    expect(new Set(ids).size).toBe(300);
    // The context a plugin gets is the service's own, its run lifecycle behind it.
    expect((context as ServiceInternals | undefined)?.lifecycle.inFlight()).toEqual({ runs: 0, waitingConversations: 0, heldTurns: 0 });
    expect(await storage.findConversation(ids[299] as string)).toMatchObject({ channelId: channel.id, language: "en_US" });
    await service.close();
  });
});
