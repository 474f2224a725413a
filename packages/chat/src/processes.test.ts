/**
 * Two `channelkit serve` processes on one database (a SQLite file, then Postgres), each
 * with a config that mounts `chatChannels()`, receiving one Telegram bot's updates through
 * the real adapter: a burst of 30 spread over both, half of it delivered twice, is every
 * message answered once, each in its turn,
 * messages delivered one after another are answered in that order, and an update delivered
 * again to the other process runs nothing.
 */
import { randomBytes } from "node:crypto";
import { externalConversationId } from "@channelkit/core";
import { postgres, sqlite } from "@channelkit/kysely";
import { describeWithPostgres } from "@channelkit/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, killAll, makeApp, runCliJson, type ServeProcess, startServe, type TestApp } from "../../cli/src/test-process.js";
import { postgresDatabase, type SharedDatabase, sqliteDatabase } from "../../cli/src/test-runs.js";
import { TelegramStandIn } from "./telegram-standin.js";

const ENV = { CHANNELKIT_SECRET_KEY: randomBytes(32).toString("hex") };
const SECRET_TOKEN = "two-processes-secret";
const CONFIG = `import { chatChannels } from "@channelkit/chat";
import { demoFlows } from "@channelkit/core/demo";

export default { flows: demoFlows, plugins: [chatChannels()] };
`;

function update(updateId: number, chatId: number, text: string) {
  return {
    update_id: updateId,
    message: { message_id: updateId, from: { id: chatId, is_bot: false, first_name: "Ada" }, chat: { id: chatId, type: "private" }, date: 1_700_000_000, text },
  };
}

function twoProcesses(name: string, makeDatabase: () => Promise<SharedDatabase>) {
  describe(name, () => {
    const bot = new TelegramStandIn();
    let database: SharedDatabase;
    let app: TestApp;
    let servers: ServeProcess[] = [];
    let channelId: string;

    beforeAll(async () => {
      [database, app] = await Promise.all([makeDatabase(), makeApp({ "channelkit.config.mjs": CONFIG }), bot.start(), ensureBuilt()]);
      const cli = <T>(...args: string[]) => runCliJson<T>([...args, "--db", database.db], ENV, { cwd: app.path });
      await cli("migrate");
      const { tenant } = await cli<{ tenant: { id: string } }>("tenant", "create", "--name", "Processes");
      const settings = ["--setting", "bot_token=42:two-processes", "--setting", `secret_token=${SECRET_TOKEN}`, "--setting", `api_url=${bot.url}`];
      const created = await cli<{ channel: { id: string }; endpoint: string }>(
        "channel",
        "create",
        "--tenant",
        tenant.id,
        "--flow",
        "echo",
        "--type",
        "telegram",
        ...settings,
      );
      channelId = created.channel.id;
      // The command prints where Telegram is to deliver.
      expect(created.endpoint).toBe(`/channels/chat/${channelId}`);
      servers = await Promise.all([0, 1].map(() => startServe(["--db", database.db, "--port", "0"], ENV, 30_000, { cwd: app.path })));
    }, 180_000);

    afterAll(async () => {
      await killAll();
      await bot.close();
      await app?.remove();
      await database?.drop();
    });

    const deliver = (body: unknown, to: number) =>
      fetch(`${(servers[to] as ServeProcess).url}/channels/chat/${channelId}`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN },
        body: JSON.stringify(body),
      });

    /** The stored messages of a chat's conversation, `role: content`, read from the database. */
    async function history(chatId: number): Promise<string[]> {
      const storage = database.db.startsWith("postgres") ? postgres(database.db) : sqlite(database.db);
      try {
        const conversationId = await externalConversationId({ id: channelId }, `telegram:${chatId}`);
        return (await storage.listRecentMessages(conversationId, 200)).map((message) => `${message.role}: ${message.content}`);
      } finally {
        await storage.close();
      }
    }

    it("answers a burst of 30 messages delivered at once to both processes, half of them twice: 30 answers, each after its message, none twice", async () => {
      const words = Array.from({ length: 30 }, (_, i) => `w${i + 1}`);
      const deliveries = words.flatMap((word, i) => {
        const once = deliver(update(10 + i, 801, word), i % 2);
        // Telegram sends every other update again, to the other process.
        return i % 2 === 0 ? [once, deliver(update(10 + i, 801, word), (i + 1) % 2)] : [once];
      });
      const answers = await Promise.all(deliveries);
      expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 200));
      const replies = () => bot.textOf(801).filter((text) => /^Echo: w\d+$/.test(text));
      await bot.waitFor(() => replies().length === words.length, "30 replies");
      expect([...replies()].sort()).toEqual(words.map((word) => `Echo: ${word}`).sort());
      const stored = await history(801);
      expect(stored).toHaveLength(60);
      const asked = stored.filter((_, i) => i % 2 === 0);
      expect(new Set(asked).size).toBe(30);
      // Each user message is followed by its own reply, and the replies reached Telegram in that order.
      for (let i = 0; i < stored.length; i += 2) expect(stored[i + 1]).toBe(`assistant: Echo: ${(stored[i] as string).slice("user: ".length)}`);
      expect(replies()).toEqual(asked.map((message) => `Echo: ${message.slice("user: ".length)}`));
    });

    it("answers messages delivered one after another, alternately to each process, in that order; a redelivered update runs nothing", async () => {
      const words = ["first", "second", "third", "fourth"];
      for (const [i, word] of words.entries()) expect((await deliver(update(100 + i, 802, word), i % 2)).status).toBe(200);
      // Telegram delivers the first update again, to the other process.
      expect((await deliver(update(100, 802, "first"), 1)).status).toBe(200);
      expect((await deliver(update(104, 802, "fifth"), 0)).status).toBe(200);
      await bot.waitFor(() => bot.textOf(802).includes("Echo: fifth"), "the reply to fifth");
      expect(bot.textOf(802)).toEqual(["Echo: first", "Echo: second", "Echo: third", "Echo: fourth", "Echo: fifth"]);
    });
  });
}

twoProcesses("two channelkit serve processes on one SQLite file", () => sqliteDatabase("chat-processes"));
describeWithPostgres("two channelkit serve processes on one Postgres database", (serverUrl) =>
  twoProcesses("with chatChannels()", () => postgresDatabase(serverUrl)),
);
