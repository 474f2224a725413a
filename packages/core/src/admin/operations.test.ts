import { describe, expect, it } from "vitest";
import { demoFlows } from "../flows/demo.js";
import { createChannelService, memoryStorage } from "../index.js";

const quiet = { warn() {}, error() {} };

async function service() {
  return createChannelService({ storage: memoryStorage(), flows: demoFlows, logger: quiet, secretKey: "cd".repeat(32) });
}

describe("service.admin and its audit trail", () => {
  it("records each change as the actor `service`, or the one given to as(); reads are not recorded", async () => {
    const s = await service();
    const { tenant } = await s.admin.createTenant({ name: "Acme" });
    const alice = s.admin.as("alice@example.com");
    const { channel } = await alice.createChannel({ tenantId: tenant.id, flow: "echo", name: "Support" });
    await alice.getChannel(channel.id);
    await s.admin.as("bob").updateChannel(channel.id, { defaultStream: true, name: "Help" });
    const { events } = await s.admin.audit({ tenantId: tenant.id });
    expect(events.map((e) => [e.operation, e.actor, e.via, e.outcome])).toEqual([
      ["update_channel", "bob", "service", "success"],
      ["create_channel", "alice@example.com", "service", "success"],
      ["create_tenant", "service", "service", "success"],
    ]);
    expect(events[0]?.changes).toEqual({ name: { from: "Support", to: "Help" }, default_stream: { from: false, to: true } });
    expect(events[1]?.changes).toMatchObject({
      flow: { from: null, to: "echo" },
      state: { from: null, to: "active" },
      environment: { from: null, to: "prod" },
    });
    expect(events[2]?.changes).toEqual({ name: { from: null, to: "Acme" } });
  });

  it("records refusals with their code: an unknown channel (tenant unknown), an archived one, an invalid input", async () => {
    const s = await service();
    const { tenant } = await s.admin.createTenant({ name: "Acme" });
    const { channel } = await s.admin.createChannel({ tenantId: tenant.id, flow: "echo" });
    const missing = crypto.randomUUID();
    await expect(s.admin.rotateKey(missing)).rejects.toMatchObject({ code: "channel_not_found" });
    await expect(s.admin.updateChannel(channel.id, { state: "gone" as "active" })).rejects.toMatchObject({ code: "validation_error" });
    await expect(s.admin.createChannel({ tenantId: tenant.id, flow: "nope" })).rejects.toMatchObject({ code: "validation_error" });
    await s.admin.updateChannel(channel.id, { state: "archived" });
    await expect(s.admin.rotateSigningSecret(channel.id)).rejects.toMatchObject({ code: "channel_archived" });

    const ofTenant = (await s.admin.audit({ tenantId: tenant.id })).events;
    expect(ofTenant.slice(0, 4).map((e) => [e.operation, e.outcome, e.error_code, e.channel_id])).toEqual([
      ["rotate_signing_secret", "failure", "channel_archived", channel.id],
      ["update_channel", "success", null, channel.id],
      ["create_channel", "failure", "validation_error", null],
      ["update_channel", "failure", "validation_error", channel.id],
    ]);
    const all = (await s.admin.audit()).events;
    expect(all.find((e) => e.channel_id === missing)).toMatchObject({ operation: "rotate_key", tenant_id: null, error_code: "channel_not_found" });
  });

  it("audit() checks its query", async () => {
    const s = await service();
    for (const query of [{ limit: 0 }, { limit: 201 }, { limit: 1.5 }, { cursor: "%%%" }, { colour: "red" } as object]) {
      await expect(s.admin.audit(query)).rejects.toMatchObject({ code: "validation_error" });
    }
  });
});
