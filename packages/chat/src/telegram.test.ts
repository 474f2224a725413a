/**
 * Telegram through `@chat-adapter/telegram`, unchanged, on real SQLite and Postgres over real
 * HTTP: the Bot API is a stand-in on 127.0.0.1 (the channel's `api_url`), and updates are
 * delivered to `serve()` with the secret token Telegram sends. Two services on one database
 * share the deliveries, as two instances behind a load balancer do.
 */
import { externalConversationId } from "@channelkit/core";
import { describeWithPostgres } from "@channelkit/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TelegramStandIn } from "./telegram-standin.js";
import { postgresDatabase, sqliteDatabase, type TestDatabase, TwoInstances } from "./test-services.js";

const SECRET_KEY = "3c".repeat(32);
const BOT_TOKEN = "123456:test-bot-token";
const SECRET_TOKEN = "telegram-secret_0123456789";

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

function telegramSuite(name: string, makeDatabase: () => Promise<TestDatabase>) {
  describe(name, () => {
    const bot = new TelegramStandIn();
    const instances = new TwoInstances();
    let channelId: string;
    /** A channel whose flow hands every conversation over to a human. */
    let handoverChannelId: string;
    /** The channels' keys. */
    let apiKey: string;
    let handoverApiKey: string;

    beforeAll(async () => {
      await bot.start();
      await instances.start(await makeDatabase(), SECRET_KEY);
      const telegramChannel = (flow: string, botToken: string) =>
        instances.admin.createChannel({
          tenantId: instances.tenantId,
          flow,
          type: "telegram",
          settings: { bot_token: botToken, secret_token: SECRET_TOKEN, api_url: bot.url },
        });
      const echo = await telegramChannel("echo", BOT_TOKEN);
      const handing = await telegramChannel("handover", "654321:handover-bot");
      [channelId, apiKey] = [echo.channel.id, echo.api_key];
      [handoverChannelId, handoverApiKey] = [handing.channel.id, handing.api_key];
    }, 60_000);

    afterAll(async () => {
      await instances.stop();
      await bot.close();
    });

    const deliver = (body: unknown, { to = 0, secret = SECRET_TOKEN, channel = channelId }: { to?: number; secret?: string | null; channel?: string } = {}) =>
      fetch(instances.webhookUrl(channel, to), {
        method: "POST",
        headers: { "content-type": "application/json", ...(secret === null ? {} : { "x-telegram-bot-api-secret-token": secret }) },
        body: JSON.stringify(body),
      });

    const history = (chatId: number, channel = channelId) => instances.history(channel, `telegram:${chatId}`);

    it("answers a private message in its chat, through the Bot API at the channel's api_url, with the bot's own token; the chat is one conversation", async () => {
      const answered = await deliver(update(1, 501, "hello"));
      expect(answered.status).toBe(200);
      await bot.waitFor(() => bot.textOf(501).includes("Echo: hello"), "the reply to hello");
      expect(bot.calls.every((call) => call.token === BOT_TOKEN)).toBe(true);
      expect(await deliver(update(2, 501, "again"), { to: 1 }).then((response) => response.status)).toBe(200);
      await bot.waitFor(() => bot.textOf(501).includes("Echo: again"), "the reply to again");
      expect(await history(501)).toEqual(["user: hello", "assistant: Echo: hello", "user: again", "assistant: Echo: again"]);
    });

    it("lets the channel's key read a chat's history on the API channel's route, and nothing else there", async () => {
      await bot.waitFor(() => bot.textOf(501).includes("Echo: again"), "the first test's replies");
      const conversationId = await externalConversationId({ id: channelId }, "telegram:501");
      const read = (key: string) =>
        fetch(`${(instances.servers[1] as { url: string }).url}/public/v1/api/conversations/${conversationId}/messages`, {
          headers: { authorization: `Bearer ${key}` },
        });
      const answered = await read(apiKey);
      expect(answered.status).toBe(200);
      const body = (await answered.json()) as { messages: { role: string; content: string; metadata?: unknown }[] };
      expect(body.messages.map((message) => `${message.role}: ${message.content}`)).toEqual(await history(501));
      // The user's messages keep Telegram's ids; the replies have none.
      expect(body.messages[0]?.metadata).toEqual({
        platform: "telegram",
        platform_thread_id: "telegram:501",
        platform_message_id: "501:1",
        platform_user_id: "501",
        platform_user_name: "ada501",
      });
      expect(body.messages[1]).not.toHaveProperty("metadata");
      // Another channel's key reads none of it; the chat channel's key runs nothing on the API channel.
      expect((await read(handoverApiKey)).status).toBe(404);
      const executed = await fetch(`${(instances.servers[0] as { url: string }).url}/public/v1/api/execute`, {
        method: "POST",
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ message: "hi" }),
      });
      expect(executed.status).toBe(403);
      expect(((await executed.json()) as { error: { code: string } }).error.code).toBe("wrong_channel_type");
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

    it("hands over to a human: the agent's replies are posted in the Telegram chat, the user's messages reach the agent, not the flow, and the bot answers again once the agent closes", async () => {
      const chatId = 507;
      expect((await deliver(update(400, chatId, "I need a person"), { channel: handoverChannelId })).status).toBe(200);
      await bot.waitFor(() => bot.textOf(chatId).includes("Connecting you to an agent"), "the handover's message");
      const conversationId = await externalConversationId({ id: handoverChannelId }, `telegram:${chatId}`);
      // The agent answers from the inbox of the other instance.
      const inbox = (path: string, body?: unknown) =>
        fetch(`${(instances.servers[1] as { url: string }).url}/api/v1/livechat/conversations/${conversationId}${path}`, {
          method: "POST",
          headers: { "x-tenant-id": instances.tenantId, "content-type": "application/json" },
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
      // Once the agent closes, the bot answers again: its flow runs (and, this one, hands over again).
      expect((await inbox("/close")).status).toBe(200);
      expect((await deliver(update(402, chatId, "Thanks, bye"), { channel: handoverChannelId })).status).toBe(200);
      await bot.waitFor(() => bot.textOf(chatId)[2] === "Connecting you to an agent", "the flow's answer after the close");
      expect(bot.textOf(chatId)).toEqual(["Connecting you to an agent", "Agent: Hi, I am Ana. How can I help?", "Connecting you to an agent"]);
    });

    it("an inactive channel answers 200 and runs nothing, so that Telegram stops retrying", async () => {
      await instances.admin.updateChannel(channelId, { state: "inactive" });
      try {
        const answered = await deliver(update(200, 505, "anyone?"));
        expect(answered.status).toBe(200);
        expect(await answered.json()).toEqual({ ignored: "inactive" });
        expect(await history(505)).toEqual([]);
      } finally {
        await instances.admin.updateChannel(channelId, { state: "active" });
      }
    });
  });
}

telegramSuite("Telegram on SQLite", sqliteDatabase);
describeWithPostgres("Telegram on Postgres", (serverUrl) => telegramSuite("on one Postgres database", () => postgresDatabase(serverUrl)));
