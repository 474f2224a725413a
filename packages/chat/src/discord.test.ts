/**
 * Discord through `@chat-adapter/discord`, unchanged, on real SQLite and Postgres over real
 * HTTP: the REST API is a stand-in on 127.0.0.1 (the channel's `api_url`). Messages arrive as
 * the adapter's Gateway listener forwards them (its envelope, with the bot token in
 * `x-discord-gateway-token`); interactions as Discord sends them, signed with Ed25519 by a key
 * pair made here, whose public key is the channel's. Two services on one database.
 */
import { generateKeyPairSync, type KeyObject, sign } from "node:crypto";
import { defineFlow, externalConversationId, suggestions, text } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { describeWithPostgres } from "@channelkit/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DiscordStandIn } from "./discord-standin.js";
import { postgresDatabase, sqliteDatabase, type TestDatabase, TwoInstances } from "./test-services.js";

const SECRET_KEY = "5e".repeat(32);
const BOT_TOKEN = "MTEwMDAw.discord-test.bot-token";
const APPLICATION_ID = "1100000000000000001";
const GUILD_ID = "1200000000000000001";
const GUILD_CHANNEL_ID = "1300000000000000001";

const application = generateKeyPairSync("ed25519");
/** The application's public key as the Developer Portal shows it: the raw 32 bytes, in hex. */
const PUBLIC_KEY = application.publicKey.export({ format: "der", type: "spki" }).subarray(-32).toString("hex");

/** Channel types (discord-api-types' ChannelType). */
const GUILD_TEXT = 0;
const DM = 1;
const PUBLIC_THREAD = 11;

const ada = { id: "1400000000000000001", username: "ada", global_name: "Ada", discriminator: "0", avatar: null };
const bot = { id: APPLICATION_ID, username: "helper", global_name: null, discriminator: "0", avatar: null, bot: true };

/** A MESSAGE_CREATE dispatch, as the Gateway sends it and the adapter's listener forwards it. */
function messageCreate(
  id: string,
  channelId: string,
  content: string,
  { guildId, channelType = DM, author = ada, mentions = [] }: { guildId?: string; channelType?: number; author?: object; mentions?: object[] } = {},
) {
  return {
    type: "GATEWAY_MESSAGE_CREATE",
    timestamp: Date.now(),
    data: {
      id,
      channel_id: channelId,
      channel_type: channelType,
      ...(guildId === undefined ? {} : { guild_id: guildId }),
      author,
      content,
      timestamp: new Date().toISOString(),
      edited_timestamp: null,
      tts: false,
      mention_everyone: false,
      mentions,
      mention_roles: [],
      attachments: [],
      embeds: [],
      pinned: false,
      type: 0,
    },
  };
}

const menu = defineFlow({
  name: "menu",
  version: "1",
  async *run(ctx) {
    if (ctx.payload !== "menu") {
      yield text(`You chose ${ctx.payload}`);
      return null;
    }
    yield text("Which fruit?");
    yield suggestions(["Apple", "Banana", "Mango"]);
    return null;
  },
});

/** Registered on instance 0 only: instance 1 runs an older release (a rolling deploy). */
const late = defineFlow({
  name: "late",
  version: "1",
  async *run(ctx) {
    yield text(`Late: ${ctx.payload}`);
    return null;
  },
});

function discordSuite(name: string, makeDatabase: () => Promise<TestDatabase>) {
  describe(name, () => {
    const api = new DiscordStandIn(APPLICATION_ID);
    const instances = new TwoInstances();
    let channelId: string;
    let menuChannelId: string;
    let handoverChannelId: string;
    let lateChannelId: string;

    beforeAll(async () => {
      await api.start();
      await instances.start(await makeDatabase(), SECRET_KEY, (instance) => ({ flows: instance === 0 ? [...demoFlows, menu, late] : [...demoFlows, menu] }));
      const discordChannel = (flow: string) =>
        instances.admin.createChannel({
          tenantId: instances.tenantId,
          flow,
          type: "discord",
          settings: { bot_token: BOT_TOKEN, public_key: PUBLIC_KEY, application_id: APPLICATION_ID, api_url: api.url },
        });
      const echo = await discordChannel("echo");
      channelId = echo.channel.id;
      menuChannelId = (await discordChannel("menu")).channel.id;
      handoverChannelId = (await discordChannel("handover")).channel.id;
      lateChannelId = (await discordChannel("late")).channel.id;
      // The bot token is sealed, never returned.
      expect(JSON.stringify(echo)).not.toContain(BOT_TOKEN);
    }, 60_000);

    afterAll(async () => {
      await instances.stop();
      await api.close();
    });

    /** A Gateway event, forwarded as the adapter's listener does it. */
    const forward = (event: unknown, { to = 0, token = BOT_TOKEN, channel = channelId }: { to?: number; token?: string; channel?: string } = {}) =>
      fetch(instances.webhookUrl(channel, to), {
        method: "POST",
        headers: { "content-type": "application/json", "x-discord-gateway-token": token },
        body: JSON.stringify(event),
      });

    /** An interaction, signed as Discord signs it: Ed25519 over the timestamp then the body. */
    const interact = (
      interaction: unknown,
      { to = 0, key = application.privateKey, channel = channelId }: { to?: number; key?: KeyObject | null; channel?: string } = {},
    ) => {
      const raw = JSON.stringify(interaction);
      const timestamp = String(Math.floor(Date.now() / 1000));
      const headers: Record<string, string> = { "content-type": "application/json" };
      if (key !== null) {
        headers["x-signature-ed25519"] = sign(null, Buffer.from(timestamp + raw), key).toString("hex");
        headers["x-signature-timestamp"] = timestamp;
      }
      return fetch(instances.webhookUrl(channel, to), { method: "POST", headers, body: raw });
    };

    const dmHistory = (dmChannelId: string, channel = channelId) => instances.history(channel, `discord:@me:${dmChannelId}`);

    it("answers Discord's PING with a PONG when it is signed with the application's key, and refuses it signed otherwise or unsigned", async () => {
      const ping = { id: "1500000000000000001", application_id: APPLICATION_ID, type: 1, token: "ping-token", version: 1 };
      const answered = await interact(ping, { to: 1 });
      expect(answered.status).toBe(200);
      expect(await answered.json()).toEqual({ type: 1 });
      expect((await interact(ping, { key: generateKeyPairSync("ed25519").privateKey })).status).toBe(401);
      expect((await interact(ping, { key: null })).status).toBe(401);
    });

    it("answers a direct message in its DM channel, through the REST API at api_url with the bot's token; the DM is one conversation", async () => {
      const dm = "1600000000000000001";
      expect((await forward(messageCreate("1700000000000000001", dm, "hello"))).status).toBe(200);
      await api.waitFor(() => api.textOf(dm).includes("Echo: hello"), "the reply to hello");
      expect((await forward(messageCreate("1700000000000000002", dm, "again"), { to: 1 })).status).toBe(200);
      await api.waitFor(() => api.textOf(dm).includes("Echo: again"), "the reply to again");
      expect(api.textOf(dm)).toEqual(["Echo: hello", "Echo: again"]);
      expect(api.calls.every((call) => call.authorization === `Bot ${BOT_TOKEN}`)).toBe(true);
      expect(await dmHistory(dm)).toEqual(["user: hello", "assistant: Echo: hello", "user: again", "assistant: Echo: again"]);
    });

    it("refuses a forwarded event without the bot token, or with another: nothing runs, nothing is stored", async () => {
      const dm = "1600000000000000002";
      expect((await forward(messageCreate("1700000000000000010", dm, "forged"), { token: "not-the-token" })).status).toBe(401);
      // Without the header it is taken for an interaction, and it is not signed.
      const unsigned = await fetch(instances.webhookUrl(channelId), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(messageCreate("1700000000000000011", dm, "forged")),
      });
      expect(unsigned.status).toBe(401);
      expect(api.calls.filter((call) => call.path.startsWith(`/channels/${dm}/`))).toEqual([]);
      expect(await dmHistory(dm)).toEqual([]);
    });

    it("answers a message forwarded again (same id), to either instance, once; and never the bot's own messages", async () => {
      const dm = "1600000000000000003";
      for (const to of [0, 1, 0]) expect((await forward(messageCreate("1700000000000000020", dm, "only once"), { to })).status).toBe(200);
      // The Gateway sends the bot's own posts too.
      expect((await forward(messageCreate("1700000000000000021", dm, "Echo: only once", { author: bot }), { to: 1 })).status).toBe(200);
      expect((await forward(messageCreate("1700000000000000022", dm, "next"), { to: 1 })).status).toBe(200);
      await api.waitFor(() => api.textOf(dm).includes("Echo: next"), "the reply to next");
      expect(api.textOf(dm)).toEqual(["Echo: only once", "Echo: next"]);
      expect(await dmHistory(dm)).toEqual(["user: only once", "assistant: Echo: only once", "user: next", "assistant: Echo: next"]);
    });

    it("answers 503 for a message its instance cannot run, keeps nothing of it, and runs it when it is forwarded again", async () => {
      const dm = "1600000000000000007";
      const event = messageCreate("2100000000000000001", dm, "first");
      const refused = await forward(event, { to: 1, channel: lateChannelId });
      expect(refused.status).toBe(503);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("flow_unavailable");
      expect(await dmHistory(dm, lateChannelId)).toEqual([]);
      expect((await forward(event, { to: 0, channel: lateChannelId })).status).toBe(200);
      await api.waitFor(() => api.textOf(dm).includes("Late: first"), "the reply to first");
      // Answered now, it stays answered.
      expect((await forward(event, { to: 0, channel: lateChannelId })).status).toBe(200);
      expect((await forward(messageCreate("2100000000000000002", dm, "second"), { to: 0, channel: lateChannelId })).status).toBe(200);
      await api.waitFor(() => api.textOf(dm).includes("Late: second"), "the reply to second");
      expect(api.textOf(dm)).toEqual(["Late: first", "Late: second"]);
      expect(await dmHistory(dm, lateChannelId)).toEqual(["user: first", "assistant: Late: first", "user: second", "assistant: Late: second"]);
    });

    it("answers messages forwarded one after another, alternately to two instances, in the order forwarded", async () => {
      const dm = "1600000000000000004";
      const words = ["one", "two", "three", "four", "five", "six"];
      for (const [i, word] of words.entries()) expect((await forward(messageCreate(`17000000000000001${i}0`, dm, word), { to: i % 2 })).status).toBe(200);
      await api.waitFor(() => api.textOf(dm).length === words.length && api.textOf(dm).every((reply) => reply.startsWith("Echo:")), "six replies");
      expect(api.textOf(dm)).toEqual(words.map((word) => `Echo: ${word}`));
      expect(await dmHistory(dm)).toEqual(words.flatMap((word) => [`user: ${word}`, `assistant: Echo: ${word}`]));
    });

    it("in a guild channel, answers a mention in a thread it starts on the message, then the thread's messages on either instance; the thread is one conversation", async () => {
      const guild = { guildId: GUILD_ID, channelType: GUILD_TEXT };
      expect((await forward(messageCreate("1800000000000000001", GUILD_CHANNEL_ID, "just chatting", guild))).status).toBe(200);
      const mention = "1800000000000000002";
      const asked = messageCreate(mention, GUILD_CHANNEL_ID, `<@${APPLICATION_ID}> what's up?`, { ...guild, mentions: [bot] });
      expect((await forward(asked)).status).toBe(200);
      // Discord gives a thread started on a message the message's id.
      await api.waitFor(() => api.textOf(mention).length === 1 && api.textOf(mention)[0] !== "...", "the reply in the new thread");
      expect(api.threads.get(mention)).toBe(GUILD_CHANNEL_ID);
      expect(api.textOf(mention)).toEqual([`Echo: <@${APPLICATION_ID}> what's up?`]);
      expect(api.textOf(GUILD_CHANNEL_ID)).toEqual([]);
      // The thread's next message, without a mention, reaches the other instance, which has not seen the thread.
      const inThread = { guildId: GUILD_ID, channelType: PUBLIC_THREAD };
      expect((await forward(messageCreate("1800000000000000003", mention, "and then?", inThread), { to: 1 })).status).toBe(200);
      await api.waitFor(() => api.textOf(mention).includes("Echo: and then?"), "the reply to the thread's message");
      expect(await instances.history(channelId, `discord:${GUILD_ID}:${GUILD_CHANNEL_ID}:${mention}`)).toEqual([
        `user: <@${APPLICATION_ID}> what's up?`,
        `assistant: Echo: <@${APPLICATION_ID}> what's up?`,
        "user: and then?",
        "assistant: Echo: and then?",
      ]);
      expect(await instances.history(channelId, `discord:${GUILD_ID}:${GUILD_CHANNEL_ID}`)).toEqual([]);
    });

    it("hands over to a human: the agent's replies are posted in the DM, the user's messages reach the agent, not the flow, and the bot answers again once the agent closes", async () => {
      const dm = "1600000000000000006";
      const say = (id: string, words: string, to = 0) => forward(messageCreate(id, dm, words), { to, channel: handoverChannelId });
      expect((await say("2000000000000000001", "I need a person")).status).toBe(200);
      await api.waitFor(() => api.textOf(dm).includes("Connecting you to an agent"), "the handover's message");
      const conversationId = await externalConversationId({ id: handoverChannelId }, `discord:@me:${dm}`);
      // The agent answers from the inbox of the other instance.
      const inbox = (path: string, body?: unknown) =>
        fetch(`${(instances.servers[1] as { url: string }).url}/api/v1/livechat/conversations/${conversationId}${path}`, {
          method: "POST",
          headers: { "x-tenant-id": instances.tenantId, "content-type": "application/json" },
          body: JSON.stringify(body ?? {}),
        });
      expect((await inbox("/accept")).status).toBe(200);
      expect((await inbox("/messages", { content: "Hi, I am Ana. How can I help?" })).status).toBe(200);
      await api.waitFor(() => api.textOf(dm).includes("Agent: Hi, I am Ana. How can I help?"), "the agent's message in the DM");
      expect((await say("2000000000000000002", "My order is late", 1)).status).toBe(200);
      await expect.poll(() => instances.history(handoverChannelId, `discord:@me:${dm}`)).toContain("user: My order is late");
      expect(api.textOf(dm)).toEqual(["Connecting you to an agent", "Agent: Hi, I am Ana. How can I help?"]);
      expect((await inbox("/close")).status).toBe(200);
      expect((await say("2000000000000000003", "Thanks, bye")).status).toBe(200);
      await api.waitFor(() => api.textOf(dm)[2] === "Connecting you to an agent", "the flow's answer after the close");
    });

    it("puts a flow's suggestions on its reply as buttons; a button pressed (a signed interaction, on the other instance) runs the flow with its suggestion", async () => {
      const dm = "1600000000000000005";
      expect((await forward(messageCreate("1900000000000000001", dm, "menu"), { channel: menuChannelId })).status).toBe(200);
      await api.waitFor(() => (api.messagesOf(dm)[0]?.buttons.length ?? 0) > 0, "the reply's buttons");
      const [reply] = api.messagesOf(dm);
      expect(reply?.text).toBe("Which fruit?");
      expect(reply?.buttons.map((button) => button.label)).toEqual(["Apple", "Banana", "Mango"]);
      const pressed = {
        id: "1910000000000000001",
        application_id: APPLICATION_ID,
        type: 3,
        token: "component-token",
        version: 1,
        channel_id: dm,
        channel: { id: dm, type: DM },
        user: ada,
        message: { id: reply?.id, channel_id: dm },
        data: { custom_id: reply?.buttons[1]?.customId, component_type: 2 },
      };
      const answered = await interact(pressed, { to: 1, channel: menuChannelId });
      expect(answered.status).toBe(200);
      // DEFERRED_UPDATE_MESSAGE: the reply comes as a message of its own.
      expect(await answered.json()).toEqual({ type: 6 });
      await api.waitFor(() => api.textOf(dm).includes("You chose Banana"), "the reply to the button");
      expect(await dmHistory(dm, menuChannelId)).toEqual(["user: menu", "assistant: Which fruit?", "user: Banana", "assistant: You chose Banana"]);
    });
  });
}

discordSuite("Discord on SQLite", sqliteDatabase);
describeWithPostgres("Discord on Postgres", (serverUrl) => discordSuite("on one Postgres database", () => postgresDatabase(serverUrl)));
