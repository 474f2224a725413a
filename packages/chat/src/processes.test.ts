/**
 * Two `channelkit serve` processes on one database (a SQLite file, then Postgres), each
 * with a config that mounts `chatChannels()`, receiving one Telegram bot's updates through
 * the real adapter: a burst spread over both is every message answered, each in its turn,
 * messages delivered one after another are answered in that order, and an update delivered
 * again to the other process runs nothing.
 */
import { randomBytes } from "node:crypto";
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
      const created = await cli<{ channel: { id: string } }>("channel", "create", "--tenant", tenant.id, "--flow", "echo", "--type", "telegram", ...settings);
      channelId = created.channel.id;
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

    it("answers a burst delivered at once to both processes: every message, none dropped", async () => {
      const words = ["a1", "b2", "c3", "d4", "e5", "f6", "g7", "h8"];
      const answers = await Promise.all(words.map((word, i) => deliver(update(10 + i, 801, word), i % 2)));
      expect(answers.map((answer) => answer.status)).toEqual(words.map(() => 200));
      await bot.waitFor(() => bot.textOf(801).filter((text) => text.startsWith("Echo:")).length === words.length, "eight replies");
      expect([...bot.textOf(801)].sort()).toEqual(words.map((word) => `Echo: ${word}`).sort());
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
