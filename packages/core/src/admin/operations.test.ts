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

describe("service.admin.listTenants and listChannels", () => {
  it("list tenants and channels in the wire's names, oldest first, never a key or a secret; reads are not recorded", async () => {
    const s = await service();
    const { tenant: acme } = await s.admin.createTenant({ name: "Acme" });
    const { tenant: globex } = await s.admin.createTenant({ name: "Globex" });
    const first = await s.admin.createChannel({ tenantId: acme.id, flow: "echo", name: "Support", requireSignature: true });
    const hook = await s.admin.createChannel({ tenantId: acme.id, flow: "slow", type: "webhook" });
    await s.admin.updateChannel(hook.channel.id, { state: "archived" });
    const other = await s.admin.createChannel({ tenantId: globex.id, flow: "echo" });
    const before = (await s.admin.audit()).events.length;

    // Oldest first: by creation time, then id (these may share a millisecond).
    const oldestFirst = <T extends { id: string; created_at: string }>(items: T[]) =>
      [...items].sort((a, b) => (a.created_at === b.created_at ? (a.id < b.id ? -1 : 1) : a.created_at < b.created_at ? -1 : 1));
    const { tenants } = await s.admin.listTenants();
    expect(tenants).toEqual(
      oldestFirst([
        { id: acme.id, name: "Acme", created_at: acme.createdAt },
        { id: globex.id, name: "Globex", created_at: globex.createdAt },
      ]),
    );
    const { channels } = await s.admin.listChannels({ tenantId: acme.id });
    const shown = async (id: string) => (await s.admin.getChannel(id)).channel;
    expect(channels).toEqual(oldestFirst([await shown(first.channel.id), await shown(hook.channel.id)]));
    expect(channels.find((c) => c.id === hook.channel.id)).toMatchObject({ state: "archived", type: "webhook", client_id: expect.any(String) });
    const text = JSON.stringify(channels);
    for (const secret of [first.api_key, first.signing_secret, hook.api_key, hook.signing_secret]) expect(text).not.toContain(secret);
    expect((await s.admin.listChannels()).channels).toEqual(oldestFirst([...channels, await shown(other.channel.id)]));
    expect((await s.admin.listChannels({})).channels).toHaveLength(3);
    expect((await s.admin.audit()).events).toHaveLength(before);
  });

  it("listChannels refuses a tenant that does not exist and an unknown field", async () => {
    const s = await service();
    const missing = crypto.randomUUID();
    await expect(s.admin.listChannels({ tenantId: missing })).rejects.toMatchObject({
      code: "validation_error",
      message: `No tenant exists with id ${missing}.`,
    });
    await expect(s.admin.listChannels({ tenant: "x" } as object)).rejects.toMatchObject({ code: "validation_error" });
    await expect(s.admin.listChannels({ tenantId: "" })).rejects.toMatchObject({ code: "validation_error" });
    expect(await s.admin.listTenants()).toEqual({ tenants: [] });
    expect(await s.admin.listChannels()).toEqual({ channels: [] });
  });
});
