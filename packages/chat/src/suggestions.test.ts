/**
 * A flow's suggestions reach Telegram as buttons on its reply (an inline keyboard, through the
 * real adapter), and a button pressed is the user saying the suggestion: the flow runs with
 * it, on whichever instance Telegram delivers the press to. SQLite and Postgres.
 */
import { defineFlow, suggestions, text } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { describeWithPostgres } from "@channelkit/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TelegramStandIn } from "./telegram-standin.js";
import { postgresDatabase, sqliteDatabase, type TestDatabase, TwoInstances } from "./test-services.js";

const SECRET_TOKEN = "suggestions-secret";

const menu = defineFlow({
  name: "menu",
  version: "1",
  async *run(ctx) {
    if (ctx.payload !== "menu") {
      yield text(`You chose ${ctx.payload}`);
      return null;
    }
    yield text("Which fruit?");
    // A suggestion longer than Telegram's 64 bytes of button data: the button carries only its place.
    yield suggestions(["Apple", "Banana", "A ripe mango from the market down the road, please"]);
    return null;
  },
});

/** 900 words of 10 characters: 9,000 characters, more than two of Telegram's messages hold. */
const LONG = Array.from({ length: 900 }, (_, i) => `word${String(i).padStart(5, "0")} `).join("");

const long = defineFlow({
  name: "long",
  version: "1",
  async *run() {
    for (const word of LONG.split(/(?<= )/)) yield text(word);
    return null;
  },
});

interface Keyboard {
  inline_keyboard: { text: string; callback_data: string }[][];
}

function suggestionsSuite(name: string, makeDatabase: () => Promise<TestDatabase>) {
  describe(name, () => {
    const bot = new TelegramStandIn();
    const instances = new TwoInstances();
    let channelId: string;

    beforeAll(async () => {
      await bot.start();
      await instances.start(await makeDatabase(), "6e".repeat(32), () => ({ flows: [...demoFlows, menu, long] }));
      channelId = (
        await instances.admin.createChannel({
          tenantId: instances.tenantId,
          flow: "menu",
          type: "telegram",
          settings: { bot_token: "77:suggestions", secret_token: SECRET_TOKEN, api_url: bot.url },
        })
      ).channel.id;
    }, 60_000);

    afterAll(async () => {
      await instances.stop();
      await bot.close();
    });

    const deliver = (body: unknown, to: number) =>
      fetch(instances.webhookUrl(channelId, to), {
        method: "POST",
        headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN },
        body: JSON.stringify(body),
      });

    it("posts a reply longer than a Telegram message as several messages, none cut; history keeps it whole", async () => {
      const longChannel = (
        await instances.admin.createChannel({
          tenantId: instances.tenantId,
          flow: "long",
          type: "telegram",
          settings: { bot_token: "78:long", secret_token: SECRET_TOKEN, api_url: bot.url },
        })
      ).channel.id;
      const chatId = 1202;
      const update = {
        update_id: 1,
        message: {
          message_id: 1,
          from: { id: chatId, is_bot: false, first_name: "Ada" },
          chat: { id: chatId, type: "private" },
          date: 1_700_000_000,
          text: "tell me everything",
        },
      };
      const delivered = await fetch(instances.webhookUrl(longChannel, 1), {
        method: "POST",
        headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN },
        body: JSON.stringify(update),
      });
      expect(delivered.status).toBe(200);
      // Each message ends between two words (the platform trims its trailing space).
      await bot.waitFor(() => bot.textOf(chatId).join(" ") === LONG.trimEnd(), "the whole reply, in messages");
      const messages = bot.textOf(chatId);
      expect(messages.length).toBe(3);
      for (const message of messages) expect(message.length).toBeLessThanOrEqual(4000);
      expect(await instances.history(longChannel, `telegram:${chatId}`)).toEqual(["user: tell me everything", `assistant: ${LONG}`]);
    });

    it("puts the suggestions on the reply as buttons; a button pressed runs the flow with its suggestion", async () => {
      const chatId = 1201;
      const from = { id: chatId, is_bot: false, first_name: "Ada" };
      const chat = { id: chatId, type: "private" };
      expect((await deliver({ update_id: 1, message: { message_id: 1, from, chat, date: 1_700_000_000, text: "menu" } }, 0)).status).toBe(200);
      const buttons = () => bot.messagesOf(chatId).flatMap((message) => (message.keyboard as Keyboard | undefined)?.inline_keyboard.flat() ?? []);
      await bot.waitFor(() => buttons().length > 0, "the reply's buttons");
      const [reply] = bot.messagesOf(chatId);
      expect(reply?.text).toBe("Which fruit?");
      const rows = (reply?.keyboard as Keyboard).inline_keyboard;
      expect(rows.flat().map((button) => button.text)).toEqual(["Apple", "Banana", "A ripe mango from the market down the road, please"]);

      // The user presses the third button; Telegram delivers the callback query to the other instance.
      const pressed = rows.flat()[2] as { callback_data: string };
      const callback = {
        id: "cb-1",
        from,
        chat_instance: "ci-1",
        data: pressed.callback_data,
        message: { message_id: reply?.id, chat, date: 1_700_000_001, text: "Which fruit?" },
      };
      expect((await deliver({ update_id: 2, callback_query: callback }, 1)).status).toBe(200);
      await bot.waitFor(() => bot.textOf(chatId).includes("You chose A ripe mango from the market down the road, please"), "the answer to the button");
      expect(bot.calls.some((call) => call.method === "answerCallbackQuery" && call.body.callback_query_id === "cb-1")).toBe(true);
      expect(await instances.history(channelId, `telegram:${chatId}`)).toEqual([
        "user: menu",
        "assistant: Which fruit?",
        "user: A ripe mango from the market down the road, please",
        "assistant: You chose A ripe mango from the market down the road, please",
      ]);
    });
  });
}

suggestionsSuite("suggestions as buttons, on SQLite", sqliteDatabase);
describeWithPostgres("suggestions as buttons, on Postgres", (serverUrl) => suggestionsSuite("on one Postgres database", () => postgresDatabase(serverUrl)));
