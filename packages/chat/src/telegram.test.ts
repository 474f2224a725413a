/**
 * Telegram through `@chat-adapter/telegram`, unchanged, on real SQLite and Postgres over real
 * HTTP: the Bot API is a stand-in on 127.0.0.1 (the channel's `api_url`), and updates are
 * delivered to `serve()` with the secret token Telegram sends. Two services on one database
 * share the deliveries, as two instances behind a load balancer do.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ChannelService, createChannelService, externalConversationId, liveChatInbox } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { type KyselyStorage, postgres, sqlite } from "@channelkit/kysely";
import { type RunningServer, serve } from "@channelkit/node";
import { createTestDatabase, describeWithPostgres } from "@channelkit/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chatChannels } from "./index.js";
import { TelegramStandIn } from "./telegram-standin.js";

const SECRET_KEY = "3c".repeat(32);
const BOT_TOKEN = "123456:test-bot-token";
const SECRET_TOKEN = "telegram-secret_0123456789";

interface Database {
  open(): KyselyStorage;
  dispose(): Promise<void>;
}

async function sqliteDatabase(): Promise<Database> {
  const dir = await mkdtemp(join(tmpdir(), "channelkit-telegram-"));
  const location = join(dir, "chat.db");
  return { open: () => sqlite(location), dispose: () => rm(dir, { recursive: true, force: true }) };
}

async function postgresDatabase(serverUrl: string): Promise<Database> {
  const database = await createTestDatabase(serverUrl);
  return { open: () => postgres(database.url), dispose: () => database.drop() };
}

/** A private-chat text message from user `chatId`, as Telegram delivers it. */
function update(updateId: number, chatId: number, text: string) {
  return {
    update_id: updateId,
    message: {
      message_id: updateId,
      from: { id: chatId, is_bot: false, first_name: "Ada", username: `ada${chatId}` },
      chat: { id: chatId, type: "private", first_name: "Ada" },
      date: Math.floor(Date.now() / 1000),
      text,
    },
  };
}

function telegramSuite(name: string, makeDatabase: () => Promise<Database>) {
  describe(name, () => {
    const bot = new TelegramStandIn();
    let database: Database;
    const services: ChannelService[] = [];
    let tenantId: string;
    /** A channel whose flow hands every conversation over to a human. */
    let handoverChannelId: string;
    const servers: RunningServer[] = [];
    const storages: KyselyStorage[] = [];
    let channelId: string;

    beforeAll(async () => {
      await bot.start();
      database = await makeDatabase();
      const plugins = [chatChannels()];
      const first = database.open();
      await first.migrate({ plugins });
      for (const storage of [first, database.open()]) {
        storages.push(storage);
        const service = await createChannelService({
          storage,
          flows: demoFlows,
          secretKey: SECRET_KEY,
          plugins: [chatChannels()],
          livechat: liveChatInbox({ development: true }),
          logger: { warn() {}, error() {} },
        });
        services.push(service);
        servers.push(await serve(service, { port: 0, host: "127.0.0.1" }));
      }
      const { tenant } = await (services[0] as ChannelService).admin.createTenant({ name: "Telegram" });
      const created = await (services[0] as ChannelService).admin.createChannel({
        tenantId: tenant.id,
        flow: "echo",
        type: "telegram",
        settings: { bot_token: BOT_TOKEN, secret_token: SECRET_TOKEN, api_url: bot.url },
      });
      channelId = created.channel.id;
      tenantId = tenant.id;
      const handing = await (services[0] as ChannelService).admin.createChannel({
        tenantId: tenant.id,
        flow: "handover",
        type: "telegram",
        settings: { bot_token: "654321:handover-bot", secret_token: SECRET_TOKEN, api_url: bot.url },
      });
      handoverChannelId = handing.channel.id;
    }, 60_000);

    afterAll(async () => {
      for (const server of servers) await server.close();
      for (const service of services) await service.close();
      await bot.close();
      await database?.dispose();
    });

    const deliver = (body: unknown, { to = 0, secret = SECRET_TOKEN, channel = channelId }: { to?: number; secret?: string | null; channel?: string } = {}) =>
      fetch(`${(servers[to] as RunningServer).url}/channels/chat/${channel}`, {
        method: "POST",
        headers: { "content-type": "application/json", ...(secret === null ? {} : { "x-telegram-bot-api-secret-token": secret }) },
        body: JSON.stringify(body),
      });

    const history = async (chatId: number, channel = channelId) => {
      const conversationId = await externalConversationId({ id: channel }, `telegram:${chatId}`);
      const messages = await (storages[0] as KyselyStorage).listRecentMessages(conversationId, 100);
      return messages.map((message) => `${message.role}: ${message.content}`);
    };

    it("answers a private message in its chat, through the Bot API at the channel's api_url, with the bot's own token; the chat is one conversation", async () => {
      const answered = await deliver(update(1, 501, "hello"));
      expect(answered.status).toBe(200);
      await bot.waitFor(() => bot.textOf(501).includes("Echo: hello"), "the reply to hello");
      expect(bot.calls.every((call) => call.token === BOT_TOKEN)).toBe(true);
      expect(await deliver(update(2, 501, "again"), { to: 1 }).then((response) => response.status)).toBe(200);
      await bot.waitFor(() => bot.textOf(501).includes("Echo: again"), "the reply to again");
      expect(await history(501)).toEqual(["user: hello", "assistant: Echo: hello", "user: again", "assistant: Echo: again"]);
    });

    it("refuses an update without Telegram's secret token, or with another: nothing runs, nothing is stored", async () => {
      const sent = bot.calls.length;
      expect((await deliver(update(10, 502, "forged"), { secret: "wrong" })).status).toBe(401);
      expect((await deliver(update(11, 502, "forged"), { secret: null })).status).toBe(401);
      expect(bot.calls.slice(sent).filter((call) => call.method === "sendMessage")).toEqual([]);
      expect(await history(502)).toEqual([]);
    });

    it("answers an update Telegram delivers again (same update_id), to either instance, once", async () => {
      expect((await deliver(update(20, 503, "only once"))).status).toBe(200);
      expect((await deliver(update(20, 503, "only once"), { to: 1 })).status).toBe(200);
      expect((await deliver(update(20, 503, "only once"))).status).toBe(200);
      await bot.waitFor(() => bot.textOf(503).length >= 1, "the reply");
      // One more message, answered after the retries: had they run, their replies came before it.
      expect((await deliver(update(21, 503, "next"), { to: 1 })).status).toBe(200);
      await bot.waitFor(() => bot.textOf(503).includes("Echo: next"), "the reply to next");
      expect(bot.textOf(503)).toEqual(["Echo: only once", "Echo: next"]);
      expect(await history(503)).toEqual(["user: only once", "assistant: Echo: only once", "user: next", "assistant: Echo: next"]);
    });

    it("answers messages delivered one after another, alternately to two instances, in the order delivered", async () => {
      const words = ["one", "two", "three", "four", "five", "six"];
      for (const [i, word] of words.entries()) expect((await deliver(update(100 + i, 504, word), { to: i % 2 })).status).toBe(200);
      await bot.waitFor(() => bot.textOf(504).length === words.length && bot.textOf(504).every((text) => text.startsWith("Echo:")), "six replies");
      expect(bot.textOf(504)).toEqual(words.map((word) => `Echo: ${word}`));
      expect(await history(504)).toEqual(words.flatMap((word) => [`user: ${word}`, `assistant: Echo: ${word}`]));
    });

    it("answers every message of a burst delivered at once to two instances: none dropped (the Chat SDK's default drops them while the thread is locked), each run in its turn", async () => {
      const words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"];
      const answers = await Promise.all(words.map((word, i) => deliver(update(300 + i, 506, word), { to: i % 2 })));
      expect(answers.map((answer) => answer.status)).toEqual(words.map(() => 200));
      await bot.waitFor(() => bot.textOf(506).length === words.length && bot.textOf(506).every((text) => text.startsWith("Echo:")), "six replies");
      expect([...bot.textOf(506)].sort()).toEqual(words.map((word) => `Echo: ${word}`).sort());
      // Each user message is followed by its own reply: the runs took turns.
      const stored = await history(506);
      expect(stored).toHaveLength(12);
      for (let i = 0; i < stored.length; i += 2) expect(stored[i + 1]).toBe(`assistant: Echo: ${(stored[i] as string).slice("user: ".length)}`);
    });

    it("hands over to a human: the agent's replies are posted in the Telegram chat, the user's messages reach the agent, not the flow", async () => {
      const chatId = 507;
      expect((await deliver(update(400, chatId, "I need a person"), { channel: handoverChannelId })).status).toBe(200);
      await bot.waitFor(() => bot.textOf(chatId).includes("Connecting you to an agent"), "the handover's message");
      const conversationId = await externalConversationId({ id: handoverChannelId }, `telegram:${chatId}`);
      // The agent answers from the inbox of the other instance.
      const inbox = (path: string, body?: unknown) =>
        fetch(`${(servers[1] as RunningServer).url}/api/v1/livechat/conversations/${conversationId}${path}`, {
          method: "POST",
          headers: { "x-tenant-id": tenantId, "content-type": "application/json" },
          body: JSON.stringify(body ?? {}),
        });
      expect((await inbox("/accept")).status).toBe(200);
      expect((await inbox("/messages", { content: "Hi, I am Ana. How can I help?" })).status).toBe(200);
      await bot.waitFor(() => bot.textOf(chatId).includes("Agent: Hi, I am Ana. How can I help?"), "the agent's message in the chat");
      expect(
        bot.calls.filter((call) => call.method === "sendMessage" && Number(call.body.chat_id) === chatId).every((call) => call.token === "654321:handover-bot"),
      ).toBe(true);
      // The user's answer goes to the agent, not to the flow.
      expect((await deliver(update(401, chatId, "My order is late"), { channel: handoverChannelId, to: 1 })).status).toBe(200);
      await expect.poll(() => history(chatId, handoverChannelId)).toContain("user: My order is late");
      expect(bot.textOf(chatId)).toEqual(["Connecting you to an agent", "Agent: Hi, I am Ana. How can I help?"]);
      expect((await inbox("/close")).status).toBe(200);
    });

    it("an inactive channel answers 200 and runs nothing, so that Telegram stops retrying", async () => {
      await (services[0] as ChannelService).admin.updateChannel(channelId, { state: "inactive" });
      try {
        const answered = await deliver(update(200, 505, "anyone?"));
        expect(answered.status).toBe(200);
        expect(await answered.json()).toEqual({ ignored: "inactive" });
        expect(await history(505)).toEqual([]);
      } finally {
        await (services[0] as ChannelService).admin.updateChannel(channelId, { state: "active" });
      }
    });
  });
}

telegramSuite("Telegram on SQLite", sqliteDatabase);
describeWithPostgres("Telegram on Postgres", (serverUrl) => telegramSuite("on one Postgres database", () => postgresDatabase(serverUrl)));
