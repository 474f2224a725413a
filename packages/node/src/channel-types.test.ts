/**
 * Channels of a type a plugin registers (issue 42), on real SQLite and Postgres: created and
 * changed through `service.admin` and the admin PATCH over HTTP, their secrets sealed in the
 * database and never in a read or the audit trail, read back opened by the plugin's own route
 * through `channelSettings`, which authenticates the channel's key for its type only.
 */
import {
  adminApi,
  authenticateRequest,
  type ChannelService,
  channelSettings,
  createChannelService,
  defineChannelType,
  definePlugin,
  defineRoute,
} from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import type { KyselyStorage } from "@channelkit/kysely";
import { describeWithPostgres, postgresTestStore, sqliteTestStore, type TestStore } from "@channelkit/testkit";
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { type RunningServer, serve } from "./serve.js";

const MASTER_KEY = "5e".repeat(32);
const JWT_SECRET = "channel-types-test-admin-secret-0123456789";
const TOKEN = "7100000001:AAE-telegram-bot-token-in-clear";

const telegramType = defineChannelType({
  name: "telegram",
  description: "A Telegram bot.",
  settings: z.object({ bot_token: z.string().min(10), greeting: z.string().optional(), webhook_secret: z.string().optional() }),
  secrets: ["bot_token", "webhook_secret"],
});

/** A plugin whose route authenticates its own channels' keys and reads their settings, secrets opened. */
const telegram = definePlugin({
  id: "telegram",
  channelTypes: [telegramType],
  routes: [
    defineRoute({
      method: "GET",
      path: "/channels/telegram/settings",
      auth: "channelKey",
      doc: {
        operationId: "telegramSettings",
        summary: "The channel's settings (a test of channelSettings)",
        tag: { name: "Telegram", description: "A test plugin." },
        responses: { 200: { description: "The settings." } },
        errors: ["missing_api_key", "invalid_api_key", "wrong_channel_type", "channel_settings_unavailable"],
      },
      async handle({ request }, ctx) {
        const { channel } = await authenticateRequest(request, ctx, { channelTypes: ["telegram"] });
        const settings = await channelSettings(ctx, channel, telegramType);
        return Response.json({ channel_id: channel.id, bot_token: settings.bot_token, greeting: settings.greeting ?? null });
      },
    }),
  ],
});

function channelTypeTests(name: string, open: () => Promise<TestStore>) {
  describe(`channels of a plugin's type: ${name}`, () => {
    let store: TestStore;
    let service: ChannelService;
    let server: RunningServer;
    let tenantId: string;

    beforeAll(async () => {
      store = await open();
      service = await createChannelService({
        storage: store.storage,
        flows: demoFlows,
        secretKey: MASTER_KEY,
        logger: { warn() {}, error() {} },
        plugins: [telegram, adminApi({ secret: JWT_SECRET })],
      });
      server = await serve(service, { port: 0 });
      tenantId = (await service.admin.createTenant({ name: "Bots" })).tenant.id;
    });

    afterAll(async () => {
      await server?.close();
      await service?.close();
      await store?.dispose();
    });

    /** The channel's row as the database holds it. */
    const rawRow = async (channelId: string) =>
      (await (store.storage as KyselyStorage).db.selectFrom("channels").selectAll().where("id", "=", channelId).executeTakeFirstOrThrow()) as Record<
        string,
        unknown
      >;

    const token = (subject = "alice") =>
      new SignJWT({ tenant_ids: [tenantId] })
        .setProtectedHeader({ alg: "HS256" })
        .setSubject(subject)
        .setIssuedAt()
        .setExpirationTime("5m")
        .sign(new TextEncoder().encode(JWT_SECRET));

    const admin = async (method: string, path: string, body?: unknown) => {
      const response = await fetch(`${server.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${await token()}`,
          "x-tenant-id": tenantId,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: response.status, body: (await response.json()) as Record<string, any> };
    };

    const pluginRoute = async (key: string) => {
      const response = await fetch(`${server.url}/channels/telegram/settings`, { headers: { authorization: `Bearer ${key}` } });
      return { status: response.status, body: (await response.json()) as Record<string, any> };
    };

    it("create, read and update with the plugin's type: the secret is sealed in the database, in no read and no audit event, and the plugin reads it opened", async () => {
      const created = await service.admin.createChannel({ tenantId, flow: "echo", type: "telegram", settings: { bot_token: TOKEN, greeting: "Hi" } });
      expect(created.channel).toMatchObject({ type: "telegram", mode: "server", settings: { greeting: "Hi" }, secrets: ["bot_token"] });
      expect(created.api_key).toMatch(/^svc_live_/);
      expect(JSON.stringify(created)).not.toContain(TOKEN);

      // Sealed at rest: the raw row holds the ciphertext, not the token.
      const row = await rawRow(created.channel.id);
      expect(row.type).toBe("telegram");
      expect(JSON.parse(row.settings as string)).toEqual({ greeting: "Hi" });
      expect(row.sealed_settings).toMatch(/^v1:/);
      expect(JSON.stringify(row)).not.toContain(TOKEN);
      expect(JSON.stringify(row)).not.toContain("bot_token");

      // Every read: service.admin, GET over HTTP, the list.
      const read = await admin("GET", `/api/v1/channels/${created.channel.id}`);
      expect(read.status).toBe(200);
      expect(read.body.channel).toEqual(created.channel);
      expect(JSON.stringify((await service.admin.listChannels({ tenantId })).channels)).not.toContain(TOKEN);

      // The plugin's own route, by the channel's key: the settings opened.
      expect(await pluginRoute(created.api_key)).toEqual({ status: 200, body: { channel_id: created.channel.id, bot_token: TOKEN, greeting: "Hi" } });

      // The admin PATCH over HTTP: a setting that is not a secret, merged into the others.
      const patched = await admin("PATCH", `/api/v1/channels/${created.channel.id}`, { settings: { greeting: "Hello" } });
      expect(patched.status).toBe(200);
      expect(patched.body.channel).toMatchObject({ settings: { greeting: "Hello" }, secrets: ["bot_token"] });
      expect((await rawRow(created.channel.id)).sealed_settings).toBe(row.sealed_settings);
      expect((await pluginRoute(created.api_key)).body).toMatchObject({ bot_token: TOKEN, greeting: "Hello" });

      // Rotation over HTTP: the new token sealed anew, in no answer, and the plugin reads it at once.
      const rotated = `${TOKEN}-rotated`;
      const rotation = await admin("PATCH", `/api/v1/channels/${created.channel.id}`, { settings: { bot_token: rotated } });
      expect(rotation.status).toBe(200);
      expect(JSON.stringify(rotation.body)).not.toContain(rotated);
      const rotatedRow = await rawRow(created.channel.id);
      expect(rotatedRow.sealed_settings).not.toBe(row.sealed_settings);
      expect(JSON.stringify(rotatedRow)).not.toContain(rotated);
      expect((await pluginRoute(created.api_key)).body).toMatchObject({ bot_token: rotated, greeting: "Hello" });

      // The audit trail: the changes, the secrets by name only.
      const audit = await admin("GET", `/api/v1/audit?channel_id=${created.channel.id}`);
      expect(audit.status).toBe(200);
      const events = audit.body.events as { operation: string; actor: string; via: string; changes: Record<string, unknown> }[];
      expect(events.map((event) => [event.operation, event.actor, event.via])).toEqual([
        ["update_channel", "alice", "http"],
        ["update_channel", "alice", "http"],
        ["create_channel", "service", "service"],
      ]);
      expect(events[0]?.changes).toEqual({ "settings.bot_token": { from: "previous", to: "new" } });
      expect(events[1]?.changes).toEqual({ settings: { from: { greeting: "Hi" }, to: { greeting: "Hello" } } });
      expect(events[2]?.changes).toMatchObject({ type: { from: null, to: "telegram" }, "settings.bot_token": { from: "none", to: "new" } });
      const trail = JSON.stringify(events);
      expect(trail).not.toContain(TOKEN);
      expect(trail).not.toContain(rotated);
      const stored = JSON.stringify(await (store.storage as KyselyStorage).db.selectFrom("audit_events").selectAll().execute());
      expect(stored).not.toContain(TOKEN);
      expect(stored).not.toContain(rotated);
    });

    it("422 validation_error naming settings.bot_token, over HTTP and through service.admin; an unknown type names the registered ones", async () => {
      const { channel } = await service.admin.createChannel({ tenantId, flow: "echo", type: "telegram", settings: { bot_token: TOKEN } });
      for (const settings of [{ bot_token: null }, { bot_token: 42 }, { bot_token: "short" }]) {
        const refused = await admin("PATCH", `/api/v1/channels/${channel.id}`, { settings });
        expect(refused.status).toBe(422);
        expect(refused.body.error).toMatchObject({ code: "validation_error", details: [{ path: "settings.bot_token" }] });
        expect(refused.body.error.message).toMatch(/^settings\.bot_token: /);
      }
      const typo = await admin("PATCH", `/api/v1/channels/${channel.id}`, { settings: { bot_tokn: TOKEN } });
      expect(typo.status).toBe(422);
      expect(typo.body.error.details).toEqual([{ path: "settings.bot_tokn", message: expect.stringContaining("has no setting") }]);
      expect(JSON.stringify(typo.body)).not.toContain(TOKEN);
      const notAnObject = await admin("PATCH", `/api/v1/channels/${channel.id}`, { settings: "bot_token=x" });
      expect(notAnObject.status).toBe(422);
      expect(notAnObject.body.error.details).toEqual([{ path: "settings", message: expect.any(String) }]);
      // Nothing changed.
      expect((await pluginRoute((await service.admin.rotateKey(channel.id)).api_key)).body.bot_token).toBe(TOKEN);

      await expect(service.admin.createChannel({ tenantId, flow: "echo", type: "telegram", settings: { greeting: "Hi" } })).rejects.toMatchObject({
        code: "validation_error",
        details: [{ path: "settings.bot_token" }],
      });
      await expect(service.admin.createChannel({ tenantId, flow: "echo", type: "slack", settings: {} })).rejects.toMatchObject({
        code: "validation_error",
        message: 'Unknown channel type "slack". Registered types: api, webhook, telegram.',
      });
      // Settings on a built-in type's channel, over HTTP.
      const api = await service.admin.createChannel({ tenantId, flow: "echo" });
      const builtIn = await admin("PATCH", `/api/v1/channels/${api.channel.id}`, { settings: { bot_token: TOKEN } });
      expect(builtIn.status).toBe(422);
      expect(builtIn.body.error.details).toEqual([{ path: "settings", message: expect.stringContaining("api channels take no settings") }]);
    });

    it("keys: a telegram channel's key is 403 wrong_channel_type on the API routes; an API key is 403 on the plugin's route", async () => {
      const bot = await service.admin.createChannel({ tenantId, flow: "echo", type: "telegram", settings: { bot_token: TOKEN } });
      const api = await service.admin.createChannel({ tenantId, flow: "echo" });
      const execute = await fetch(`${server.url}/public/v1/api/execute`, {
        method: "POST",
        headers: { authorization: `Bearer ${bot.api_key}`, "content-type": "application/json" },
        body: JSON.stringify({ payload: "hi", stream: false }),
      });
      expect(execute.status).toBe(403);
      expect(((await execute.json()) as { error: { code: string } }).error.code).toBe("wrong_channel_type");
      const refused = await pluginRoute(api.api_key);
      expect(refused.status).toBe(403);
      expect(refused.body.error).toEqual({ code: "wrong_channel_type", message: "This key belongs to a channel that is not of the telegram type." });
      expect((await pluginRoute(bot.api_key)).status).toBe(200);
    });
  });
}

channelTypeTests("SQLite", sqliteTestStore);
describeWithPostgres("Postgres", (serverUrl) => channelTypeTests("Postgres", () => postgresTestStore(serverUrl)));
