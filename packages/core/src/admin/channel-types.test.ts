import { describe, expect, expectTypeOf, it } from "vitest";
import { z } from "zod";
import { demoFlows } from "../flows/demo.js";
import {
  authenticateApiKey,
  type ChannelRecord,
  channelSettings,
  createChannelService,
  defineChannelType,
  definePlugin,
  isServiceError,
  memoryStorage,
  type ServiceContext,
  type Storage,
} from "../index.js";

const MASTER_KEY = "cd".repeat(32);
const TOKEN = "123456:telegram-bot-token-in-clear";

const telegramType = defineChannelType({
  name: "telegram",
  settings: z.object({ bot_token: z.string().min(10), greeting: z.string().optional(), webhook_secret: z.string().optional() }),
  secrets: ["bot_token", "webhook_secret"],
});

function logger() {
  const warnings: string[] = [];
  return { warnings, warn: (message: string) => warnings.push(message), error() {} };
}

/** A service with the telegram plugin (unless `plugins` is false), and the context its routes get. */
async function service(options: { storage?: Storage; secretKey?: string; plugins?: boolean } = {}) {
  const log = logger();
  const storage = options.storage ?? memoryStorage();
  let context: ServiceContext | undefined;
  const telegram = definePlugin({
    id: "telegram",
    channelTypes: [telegramType],
    init(ctx) {
      context = ctx;
    },
  });
  const s = await createChannelService({
    storage,
    flows: demoFlows,
    logger: log,
    secretKey: options.secretKey ?? MASTER_KEY,
    plugins: options.plugins === false ? [] : [telegram],
  });
  return Object.assign(s, { warnings: log.warnings, storage: () => storage, ctx: () => context as ServiceContext });
}

/** Everything a value holds, as text: a secret must be in none of it. */
const text = (value: unknown) => JSON.stringify(value);

describe("channels of a plugin's type through service.admin", () => {
  it("creates one with its settings; the view shows those that are not secrets and names the secrets set; the key is a server key", async () => {
    const s = await service();
    const { tenant } = await s.admin.createTenant({ name: "Acme" });
    const created = await s.admin.createChannel({ tenantId: tenant.id, flow: "echo", type: "telegram", settings: { bot_token: TOKEN, greeting: "Hi" } });
    expect(created.channel).toMatchObject({ type: "telegram", mode: "server", settings: { greeting: "Hi" }, secrets: ["bot_token"] });
    expect(created.api_key).toMatch(/^svc_live_/);
    expect(created.signing_secret).toBeNull();
    expect(created.channel).not.toHaveProperty("client_id");
    expect(text(created)).not.toContain(TOKEN);
    expect(text(await s.admin.getChannel(created.channel.id))).not.toContain(TOKEN);
    expect((await s.admin.getChannel(created.channel.id)).channel).toEqual(created.channel);
    expect((await s.admin.listChannels({ tenantId: tenant.id })).channels).toEqual([created.channel]);

    // The secret is sealed at rest, under the master key: opened by channelSettings only.
    const stored = (await s.storage().findChannel(created.channel.id)) as ChannelRecord;
    expect(stored.settings).toEqual({ greeting: "Hi" });
    expect(stored.sealedSettings).toMatch(/^v1:/);
    expect(text(stored)).not.toContain(TOKEN);
    const settings = await channelSettings(s.ctx(), stored, telegramType);
    expect(settings).toEqual({ bot_token: TOKEN, greeting: "Hi" });
    expectTypeOf(settings).toEqualTypeOf<{ bot_token: string; greeting?: string | undefined; webhook_secret?: string | undefined }>();

    // The audit trail names the secret as set, never its value.
    const [event] = (await s.admin.audit({ channelId: created.channel.id })).events;
    expect(event?.changes).toMatchObject({
      type: { from: null, to: "telegram" },
      settings: { from: null, to: { greeting: "Hi" } },
      "settings.bot_token": { from: "none", to: "new" },
    });
    expect(text(event)).not.toContain(TOKEN);
    await s.close();
  });

  it("refuses invalid settings with 422 validation_error naming settings.<field>; an unknown field too", async () => {
    const s = await service();
    const { tenant } = await s.admin.createTenant({ name: "Acme" });
    const refusal = async (settings: Record<string, unknown> | undefined) => {
      const error = await s.admin.createChannel({ tenantId: tenant.id, flow: "echo", type: "telegram", ...(settings ? { settings } : {}) }).catch((e) => e);
      expect(isServiceError(error) && error.code).toBe("validation_error");
      return error as { message: string; details: { path: string; message: string }[] };
    };
    expect((await refusal(undefined)).details.map((d) => d.path)).toEqual(["settings.bot_token"]);
    expect((await refusal({ greeting: "Hi" })).message).toMatch(/^settings\.bot_token: /);
    expect((await refusal({ bot_token: "short" })).details.map((d) => d.path)).toEqual(["settings.bot_token"]);
    const unknown = await refusal({ bot_token: TOKEN, colour: "red" });
    expect(unknown.details).toEqual([{ path: "settings.colour", message: expect.stringContaining('has no setting "colour"') }]);
    // A secret's value is in no message.
    expect(text(unknown)).not.toContain(TOKEN);
    expect((await s.admin.listChannels({ tenantId: tenant.id })).channels).toEqual([]);
    await s.close();
  });

  it("refuses an unknown type naming the registered ones, and settings on a built-in type", async () => {
    const s = await service();
    const { tenant } = await s.admin.createTenant({ name: "Acme" });
    await expect(s.admin.createChannel({ tenantId: tenant.id, flow: "echo", type: "slack" })).rejects.toMatchObject({
      code: "validation_error",
      message: 'Unknown channel type "slack". Registered types: api, webhook, telegram.',
      details: [{ path: "type" }],
    });
    for (const type of ["api", "webhook"]) {
      await expect(s.admin.createChannel({ tenantId: tenant.id, flow: "echo", type, settings: {} })).rejects.toMatchObject({
        code: "validation_error",
        details: [{ path: "settings", message: `${type} channels take no settings: settings are for the channel types of plugins (registered: telegram).` }],
      });
    }
    const { channel } = await s.admin.createChannel({ tenantId: tenant.id, flow: "echo" });
    await expect(s.admin.updateChannel(channel.id, { settings: { bot_token: TOKEN } })).rejects.toMatchObject({
      code: "validation_error",
      details: [{ path: "settings" }],
    });
    // The built-in views are as they were: no settings, no secrets.
    expect(channel).not.toHaveProperty("settings");
    expect(channel).not.toHaveProperty("secrets");
    const refused = (await s.admin.audit({ tenantId: tenant.id })).events.filter((event) => event.outcome === "failure");
    expect(refused.map((event) => event.error_code)).toEqual(["validation_error", "validation_error", "validation_error", "validation_error"]);
    await s.close();
  });

  it("update merges the fields sent into the stored ones and validates the whole; null removes one; a secret sent is sealed again (rotation)", async () => {
    const s = await service();
    const { tenant } = await s.admin.createTenant({ name: "Acme" });
    const { channel } = await s.admin.createChannel({ tenantId: tenant.id, flow: "echo", type: "telegram", settings: { bot_token: TOKEN, greeting: "Hi" } });
    const before = (await s.storage().findChannel(channel.id)) as ChannelRecord;

    // A setting that is not a secret: the secrets are kept as sealed.
    const renamed = await s.admin.updateChannel(channel.id, { settings: { greeting: "Hello" } });
    expect(renamed.channel).toMatchObject({ settings: { greeting: "Hello" }, secrets: ["bot_token"] });
    const afterGreeting = (await s.storage().findChannel(channel.id)) as ChannelRecord;
    expect(afterGreeting.sealedSettings).toBe(before.sealedSettings);

    // Rotation: the new token sealed anew, the old one gone.
    const rotated = `${TOKEN}-rotated`;
    const update = await s.admin.updateChannel(channel.id, { settings: { bot_token: rotated, webhook_secret: "whsec-value-1" } });
    expect(update.channel).toMatchObject({ settings: { greeting: "Hello" }, secrets: ["bot_token", "webhook_secret"] });
    expect(text(update)).not.toContain(rotated);
    const afterRotation = (await s.storage().findChannel(channel.id)) as ChannelRecord;
    expect(afterRotation.sealedSettings).not.toBe(before.sealedSettings);
    expect(await channelSettings(s.ctx(), afterRotation, telegramType)).toEqual({ bot_token: rotated, greeting: "Hello", webhook_secret: "whsec-value-1" });

    // null removes a field; the whole is validated: the token cannot be removed.
    const removed = await s.admin.updateChannel(channel.id, { settings: { greeting: null, webhook_secret: null } });
    expect(removed.channel).toMatchObject({ settings: {}, secrets: ["bot_token"] });
    await expect(s.admin.updateChannel(channel.id, { settings: { bot_token: null } })).rejects.toMatchObject({
      code: "validation_error",
      details: [{ path: "settings.bot_token" }],
    });
    await expect(s.admin.updateChannel(channel.id, { settings: { bot_token: "short" } })).rejects.toMatchObject({ details: [{ path: "settings.bot_token" }] });
    expect(await channelSettings(s.ctx(), (await s.storage().findChannel(channel.id)) as ChannelRecord, telegramType)).toEqual({ bot_token: rotated });

    const events = (await s.admin.audit({ channelId: channel.id })).events.filter((event) => event.outcome === "success");
    expect(events.map((event) => event.changes).slice(0, 3)).toEqual([
      { settings: { from: { greeting: "Hello" }, to: {} }, "settings.webhook_secret": { from: "previous", to: "none" } },
      { "settings.bot_token": { from: "previous", to: "new" }, "settings.webhook_secret": { from: "none", to: "new" } },
      { settings: { from: { greeting: "Hi" }, to: { greeting: "Hello" } } },
    ]);
    for (const event of (await s.admin.audit({ channelId: channel.id })).events) {
      expect(text(event)).not.toContain(TOKEN);
      expect(text(event)).not.toContain("whsec-value-1");
    }
    await s.close();
  });

  it("keys: a plugin channel's key authenticates where its type is served, and is wrong_channel_type on the API routes", async () => {
    const s = await service();
    const { tenant } = await s.admin.createTenant({ name: "Acme" });
    const plugin = await s.admin.createChannel({ tenantId: tenant.id, flow: "echo", type: "telegram", settings: { bot_token: TOKEN } });
    const api = await s.admin.createChannel({ tenantId: tenant.id, flow: "echo" });
    const request = (key: string) => ({ headers: new Headers({ authorization: `Bearer ${key}` }) });
    const storage = s.storage();
    await expect(authenticateApiKey(request(plugin.api_key), storage, new Date())).rejects.toMatchObject({ code: "wrong_channel_type" });
    const found = await authenticateApiKey(request(plugin.api_key), storage, new Date(), { channelTypes: ["telegram"] });
    expect(found.channel.id).toBe(plugin.channel.id);
    await expect(authenticateApiKey(request(api.api_key), storage, new Date(), { channelTypes: ["telegram"] })).rejects.toMatchObject({
      code: "wrong_channel_type",
      message: "This key belongs to a channel that is not of the telegram type.",
    });
    expect((await authenticateApiKey(request(api.api_key), storage, new Date())).channel.id).toBe(api.channel.id);
    await s.close();
  });

  it("channelSettings without the type uses the registered one; another type is refused; a master key that cannot open them is 503 channel_settings_unavailable", async () => {
    const storage = memoryStorage();
    // The first service's close leaves the storage open for the next one.
    const s = await service({ storage: { ...storage, close: async () => undefined } });
    const { tenant } = await s.admin.createTenant({ name: "Acme" });
    const { channel } = await s.admin.createChannel({ tenantId: tenant.id, flow: "echo", type: "telegram", settings: { bot_token: TOKEN } });
    const record = (await storage.findChannel(channel.id)) as ChannelRecord;
    expect(await channelSettings(s.ctx(), record)).toEqual({ bot_token: TOKEN });
    const other = defineChannelType({ name: "slack", settings: z.object({ token: z.string() }) });
    await expect(channelSettings(s.ctx(), record, other)).rejects.toThrow('is of type "telegram", not "slack"');
    await s.close();

    // Started with another master key: the secrets stay sealed, and the service says so.
    const other2 = await service({ storage, secretKey: "ab".repeat(32) });
    expect(other2.warnings.some((w) => w.includes("the secret settings of 1 channel(s) cannot be opened") && w.includes(channel.id))).toBe(true);
    const error = await channelSettings(other2.ctx(), record, telegramType).catch((e) => e);
    expect(error).toMatchObject({ code: "channel_settings_unavailable" });
    expect(error.message).toContain(channel.id);
    expect((await other2.admin.getChannel(channel.id)).channel).toMatchObject({ secrets: null, settings: {} });
    // An update that does not replace every secret keeps them rather than lose them...
    await expect(other2.admin.updateChannel(channel.id, { settings: { greeting: "Hi" } })).rejects.toMatchObject({ code: "channel_settings_unavailable" });
    // ...one that sends them all seals them with the key in use.
    const replaced = await other2.admin.updateChannel(channel.id, { settings: { bot_token: `${TOKEN}-new`, webhook_secret: null } });
    expect(replaced.channel).toMatchObject({ secrets: ["bot_token"] });
    const [event] = (await other2.admin.audit({ channelId: channel.id })).events.filter((e) => e.outcome === "success");
    expect(event?.changes).toEqual({ "settings.bot_token": { from: "unreadable", to: "new" }, "settings.webhook_secret": { from: "unreadable", to: "none" } });
    await other2.close();
  });

  it("start-up warns of channels whose type no plugin of the service registers", async () => {
    const storage = memoryStorage();
    // The first service's close leaves the storage open for the next one.
    const s = await service({ storage: { ...storage, close: async () => undefined } });
    const { tenant } = await s.admin.createTenant({ name: "Acme" });
    const { channel } = await s.admin.createChannel({ tenantId: tenant.id, flow: "echo", type: "telegram", settings: { bot_token: TOKEN } });
    expect(s.warnings.filter((w) => w.includes("channel type"))).toEqual([]);
    await s.close();
    const without = await service({ storage, plugins: false });
    const warning = without.warnings.find((w) => w.includes("of a channel type no plugin of this service registers"));
    expect(warning).toContain(`${channel.id} (type "telegram")`);
    expect(warning).toContain("Registered types: api, webhook.");
    // Its settings cannot be checked, so they are not changed; its other fields can be.
    await expect(without.admin.updateChannel(channel.id, { settings: { greeting: "Hi" } })).rejects.toMatchObject({
      code: "validation_error",
      details: [{ path: "settings" }],
    });
    expect((await without.admin.updateChannel(channel.id, { name: "Bot" })).channel).toMatchObject({ name: "Bot", type: "telegram", secrets: ["bot_token"] });
    await without.close();
  });
});

describe("the endpoint of a plugin's channel type", () => {
  const hooked = defineChannelType({ ...telegramType, name: "hooked", endpoint: "/channels/hooked/{channel_id}" });

  it("is answered by createChannel, under the service's basePath, for the type that declares one, and only then", async () => {
    const s = await createChannelService({
      storage: memoryStorage(),
      flows: demoFlows,
      secretKey: MASTER_KEY,
      basePath: "/bots/",
      plugins: [definePlugin({ id: "hooked", channelTypes: [hooked, telegramType] })],
    });
    const { tenant } = await s.admin.createTenant({ name: "Acme" });
    const created = await s.admin.createChannel({ tenantId: tenant.id, flow: "echo", type: "hooked", settings: { bot_token: TOKEN } });
    expect(created.endpoint).toBe(`/bots/channels/hooked/${created.channel.id}`);
    const plain = await s.admin.createChannel({ tenantId: tenant.id, flow: "echo", type: "telegram", settings: { bot_token: TOKEN } });
    expect(plain).not.toHaveProperty("endpoint");
    expect(await s.admin.createChannel({ tenantId: tenant.id, flow: "echo" })).not.toHaveProperty("endpoint");
    await s.close();
  });
});
