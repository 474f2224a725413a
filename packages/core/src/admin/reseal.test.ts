import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { demoFlows } from "../flows/demo.js";
import {
  channelSettings,
  createChannelService,
  createSecretBox,
  defineChannelType,
  definePlugin,
  memoryStorage,
  type ServiceContext,
  type Storage,
} from "../index.js";
import { resealChannel } from "./reseal.js";

const OLD = randomBytes(32).toString("hex");
const NEW = randomBytes(32).toString("hex");
const TOKEN = "123456:bot-token-in-clear";

const botType = defineChannelType({ name: "bot", settings: z.object({ bot_token: z.string(), greeting: z.string().optional() }), secrets: ["bot_token"] });

async function stored(storage: Storage, id: string) {
  const channel = await storage.findChannel(id);
  if (!channel) throw new Error(`channel ${id} is not stored`);
  return channel;
}

async function service(storage: Storage, secretKey: string, secretKeyFallbacks?: string[]) {
  const warnings: string[] = [];
  let context: ServiceContext | undefined;
  const plugin = definePlugin({
    id: "bot",
    channelTypes: [botType],
    init(ctx) {
      context = ctx;
    },
  });
  const s = await createChannelService({
    storage,
    flows: demoFlows,
    secretKey,
    ...(secretKeyFallbacks ? { secretKeyFallbacks } : {}),
    logger: { warn: (message) => warnings.push(message), error() {} },
    plugins: [plugin],
  });
  return Object.assign(s, { warnings, ctx: () => context as ServiceContext });
}

describe("service.admin.resealSecrets", () => {
  it("reseals a plugin type's secret settings and a signing secret under the current key, leaves archived channels, and audits each channel", async () => {
    const storage = memoryStorage();
    const before = await service(storage, OLD);
    const { tenant } = await before.admin.createTenant({ name: "Acme" });
    const bot = await before.admin.createChannel({ tenantId: tenant.id, flow: "echo", type: "bot", settings: { bot_token: TOKEN, greeting: "Hi" } });
    const signed = await before.admin.createChannel({ tenantId: tenant.id, flow: "echo", requireSignature: true });
    const archived = await before.admin.createChannel({ tenantId: tenant.id, flow: "echo", requireSignature: true });
    await before.admin.updateChannel(archived.channel.id, { state: "archived" });
    const plain = await before.admin.createChannel({ tenantId: tenant.id, flow: "echo" });

    const rotating = await service(storage, NEW, [OLD]);
    expect(rotating.warnings.join("\n")).toContain(`2 channel(s) hold secrets sealed under a fallback master key`);
    // Readable through the fallback before the reseal.
    expect((await channelSettings(rotating.ctx(), await stored(storage, bot.channel.id), botType)).bot_token).toBe(TOKEN);

    const done = await rotating.admin.as("ops").resealSecrets();
    expect(done.resealed.sort()).toEqual([bot.channel.id, signed.channel.id].sort());
    // The plain channel has a signing secret too (prepared for when signatures are turned on).
    expect(done).toMatchObject({ unopened: [] });
    expect(done.current).toBe(plain.signing_secret === null ? 0 : 1);

    const after = await service(storage, NEW);
    expect(after.warnings.join("\n")).not.toMatch(/cannot be opened|fallback/);
    expect((await channelSettings(after.ctx(), await stored(storage, bot.channel.id), botType)).bot_token).toBe(TOKEN);
    const newBox = createSecretBox(NEW);
    expect(await newBox.decrypt((await storage.findChannel(signed.channel.id))?.signingSecretEncrypted ?? "")).toBe(signed.signing_secret);
    // Archived: left sealed under the old key.
    expect(await createSecretBox(OLD).decrypt((await storage.findChannel(archived.channel.id))?.signingSecretEncrypted ?? "")).toBe(archived.signing_secret);

    const events = (await after.admin.audit({ tenantId: tenant.id })).events.filter((event) => event.operation === "reseal_secrets");
    expect(events.map((event) => [event.channel_id, event.actor, event.changes])).toEqual(
      expect.arrayContaining([
        [bot.channel.id, "ops", { secret_settings: { from: "fallback key", to: "current key" } }],
        [signed.channel.id, "ops", { signing_secret: { from: "fallback key", to: "current key" } }],
      ]),
    );
    expect(events).toHaveLength(2);
    expect(JSON.stringify(events)).not.toContain(TOKEN);
    await after.close();
  });

  it("never overwrites a secret rotated after the channel was read: it reads the channel again", async () => {
    const storage = memoryStorage();
    const before = await service(storage, OLD);
    const { tenant } = await before.admin.createTenant({ name: "Acme" });
    const signed = await before.admin.createChannel({ tenantId: tenant.id, flow: "echo", requireSignature: true });

    const rotating = await service(storage, NEW, [OLD]);
    const stale = await storage.findChannel(signed.channel.id);
    if (!stale) throw new Error("channel not stored");
    const { signing_secret: rotated } = await rotating.admin.rotateSigningSecret(signed.channel.id);
    const audited: unknown[] = [];
    const outcome = await resealChannel(rotating.ctx(), stale, (channel, changes) => {
      audited.push(changes);
      return {
        id: crypto.randomUUID(),
        timestamp: new Date().toISOString(),
        tenantId: channel.tenantId,
        channelId: channel.id,
        actor: "test",
        via: "service",
        operation: "reseal_secrets",
        changes,
        outcome: "success",
        errorCode: null,
      };
    });
    // The write of the stale read was refused (one audit event made, none stored); the channel read again was current.
    expect(outcome).toBe("current");
    expect(audited).toHaveLength(1);
    expect((await rotating.admin.audit({ tenantId: tenant.id })).events.filter((event) => event.operation === "reseal_secrets")).toEqual([]);
    expect(await createSecretBox(NEW).decrypt((await storage.findChannel(signed.channel.id))?.signingSecretEncrypted ?? "")).toBe(rotated);
  });

  it("a confined caller reseals its own tenant's channels only", async () => {
    const storage = memoryStorage();
    const before = await service(storage, OLD);
    const a = (await before.admin.createTenant({ name: "A" })).tenant;
    const b = (await before.admin.createTenant({ name: "B" })).tenant;
    const ofA = await before.admin.createChannel({ tenantId: a.id, flow: "echo", requireSignature: true });
    const ofB = await before.admin.createChannel({ tenantId: b.id, flow: "echo", requireSignature: true });
    const rotating = await service(storage, NEW, [OLD]);
    const internal = rotating.ctx().admin;
    const done = await internal.as({ actor: "alice", via: "http", tenantId: a.id }).resealSecrets();
    expect(done.resealed).toEqual([ofA.channel.id]);
    expect(await createSecretBox(OLD).decrypt((await storage.findChannel(ofB.channel.id))?.signingSecretEncrypted ?? "")).toBe(ofB.signing_secret);
  });
});
