/**
 * A received message is never lost: a delivery whose message cannot be run (here on an
 * instance without the channel's flow) answers 503 and is not kept as received, so the
 * platform's retry runs it, and a message already answered stays answered once; a run that
 * waited too long for its turn takes a new one. Telegram through its real adapter, two
 * services on SQLite and on Postgres.
 */
import { defineFlow, text } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { describeWithPostgres } from "@channelkit/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TelegramStandIn } from "./telegram-standin.js";
import { postgresDatabase, sqliteDatabase, type TestDatabase, TwoInstances } from "./test-services.js";

const SECRET_TOKEN = "delivery-failures-secret";

/** A gate the test opens: a run of the `gated` flow holds its conversation's turn until then. */
class Gate {
  #open!: () => void;
  readonly opened = new Promise<void>((resolve) => {
    this.#open = resolve;
  });
  reached!: () => void;
  readonly entered = new Promise<void>((resolve) => {
    this.reached = resolve;
  });
  open(): void {
    this.#open();
  }
}

function update(updateId: number, chatId: number, text: string) {
  return {
    update_id: updateId,
    message: { message_id: updateId, from: { id: chatId, is_bot: false, first_name: "Ada" }, chat: { id: chatId, type: "private" }, date: 1_700_000_000, text },
  };
}

function failuresSuite(name: string, makeDatabase: () => Promise<TestDatabase>) {
  describe(name, () => {
    const bot = new TelegramStandIn();
    const instances = new TwoInstances();
    const warnings: string[] = [];
    let gate = new Gate();
    let channelId: string;

    const gated = defineFlow({
      name: "gated",
      version: "1",
      async *run(ctx) {
        if (ctx.payload === "hold") {
          gate.reached();
          await gate.opened;
        }
        yield text(`Got ${ctx.payload}`);
        return null;
      },
    });

    beforeAll(async () => {
      await bot.start();
      // Instance 1 runs an older release, without the `gated` flow (a rolling deploy). On
      // both, a run gives up its wait for the turn after 300 ms.
      await instances.start(await makeDatabase(), "5d".repeat(32), (instance) => ({
        flows: instance === 0 ? [...demoFlows, gated] : demoFlows,
        turnWaitTimeoutMs: 300,
        logger: { warn: (message: string) => void warnings.push(message), error() {} },
      }));
      channelId = (
        await instances.admin.createChannel({
          tenantId: instances.tenantId,
          flow: "gated",
          type: "telegram",
          settings: { bot_token: "99:failures", secret_token: SECRET_TOKEN, api_url: bot.url },
        })
      ).channel.id;
    }, 60_000);

    afterAll(async () => {
      gate.open();
      await instances.stop();
      await bot.close();
    });

    const deliver = (body: unknown, to: number) =>
      fetch(instances.webhookUrl(channelId, to), {
        method: "POST",
        headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN },
        body: JSON.stringify(body),
      });
    const history = (chatId: number) => instances.history(channelId, `telegram:${chatId}`);

    it("answers 503 for a message its instance cannot run, keeps nothing of it, and runs it when Telegram sends it again", async () => {
      const chatId = 901;
      const refused = await deliver(update(1, chatId, "first"), 1);
      expect(refused.status).toBe(503);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("flow_unavailable");
      expect(await history(chatId)).toEqual([]);
      // Telegram sends the update again; it reaches the instance that has the flow.
      expect((await deliver(update(1, chatId, "first"), 0)).status).toBe(200);
      await bot.waitFor(() => bot.textOf(chatId).includes("Got first"), "the reply to first");
      // Answered now, it stays answered: another retry runs nothing.
      expect((await deliver(update(1, chatId, "first"), 0)).status).toBe(200);
      expect((await deliver(update(2, chatId, "second"), 0)).status).toBe(200);
      await bot.waitFor(() => bot.textOf(chatId).includes("Got second"), "the reply to second");
      expect(bot.textOf(chatId)).toEqual(["Got first", "Got second"]);
      expect(await history(chatId)).toEqual(["user: first", "assistant: Got first", "user: second", "assistant: Got second"]);
    });

    it("runs a message that waited for its turn longer than the service allows again, instead of losing it", async () => {
      gate = new Gate();
      const chatId = 902;
      const holding = deliver(update(10, chatId, "hold"), 0);
      await gate.entered;
      expect((await holding).status).toBe(200);
      expect((await deliver(update(11, chatId, "next"), 0)).status).toBe(200);
      await expect.poll(() => warnings.some((warning) => warning.includes("waited too long for its turn")), { timeout: 10_000 }).toBe(true);
      gate.open();
      await bot.waitFor(() => bot.textOf(chatId).includes("Got next"), "the reply to next");
      expect(bot.textOf(chatId)).toEqual(["Got hold", "Got next"]);
      expect(await history(chatId)).toEqual(["user: hold", "assistant: Got hold", "user: next", "assistant: Got next"]);
    });
  });
}

failuresSuite("a delivery that cannot run, on SQLite", sqliteDatabase);
describeWithPostgres("a delivery that cannot run, on Postgres", (serverUrl) => failuresSuite("on one Postgres database", () => postgresDatabase(serverUrl)));
