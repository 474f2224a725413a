/**
 * Microsoft Teams through `@chat-adapter/teams`, unchanged: Bot Framework's OpenID metadata
 * and keys, Entra ID's token endpoint and the Bot Connector are a stand-in on 127.0.0.1 (the
 * channel's `openid_metadata_url` and `login_url`, the activity's `serviceUrl`), and
 * deliveries carry a JWT signed as the Bot Connector signs them. Two services on one
 * database, SQLite then Postgres.
 */
import { defineFlow, suggestions, text } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { describeWithPostgres } from "@channelkit/testkit";
import { encodeThreadId } from "@chat-adapter/teams";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TeamsStandIn as StandIn, TeamsStandIn, type TokenOptions } from "./teams-standin.js";
import { postgresDatabase, sqliteDatabase, type TestDatabase, TwoInstances } from "./test-services.js";

const SECRET_KEY = "5e".repeat(32);
const APP_ID = "6f1b3c1e-8f2a-4c1d-9a4e-2b7c0d5e9f10";
const APP_PASSWORD = "teams-app-password~secret";
const TENANT_ID = "72f988bf-86f1-41af-91ab-2d7cd011db47";

const menu = defineFlow({
  name: "menu",
  version: "1",
  async *run(ctx) {
    if (ctx.payload !== "menu") {
      yield text(`You chose ${ctx.payload}`);
      return null;
    }
    yield text("Which fruit?");
    yield suggestions(["Apple", "Banana"]);
    return null;
  },
});

/** A personal chat's conversation id, as Teams names it. */
const personal = (user: string) => `a:1${user}Xq7dVJ9mZ0kq3Yw`;

/** A user's message to the bot in their personal chat, as the Bot Connector delivers it. */
function activity(teams: StandIn, id: string, user: string, text: string | undefined, extra: Record<string, unknown> = {}) {
  return {
    type: "message",
    id,
    timestamp: new Date().toISOString(),
    serviceUrl: teams.serviceUrl,
    channelId: "msteams",
    from: { id: `29:1${user}`, name: "Megan Bowen", aadObjectId: "00000000-0000-0000-0000-0000000000a1" },
    conversation: { conversationType: "personal", tenantId: TENANT_ID, id: personal(user) },
    recipient: { id: `28:${APP_ID}`, name: "Helper" },
    textFormat: "plain",
    locale: "en-US",
    text,
    entities: [{ type: "clientInfo", locale: "en-US", country: "US", platform: "Web" }],
    channelData: { tenant: { id: TENANT_ID } },
    ...extra,
  };
}

/** The conversation key of a user's personal chat: the adapter's thread id. */
const threadOf = (teams: StandIn, user: string) =>
  encodeThreadId({ conversationId: personal(user), conversationType: "personal", serviceUrl: teams.serviceUrl });

function teamsSuite(name: string, makeDatabase: () => Promise<TestDatabase>) {
  describe(name, () => {
    const teams = new TeamsStandIn({ appId: APP_ID, appPassword: APP_PASSWORD });
    const instances = new TwoInstances();
    let channelId: string;

    beforeAll(async () => {
      await teams.start();
      await instances.start(await makeDatabase(), SECRET_KEY, () => ({ flows: [...demoFlows, menu] }));
      const created = await instances.admin.createChannel({
        tenantId: instances.tenantId,
        flow: "echo",
        type: "teams",
        settings: { app_id: APP_ID, app_password: APP_PASSWORD, tenant_id: TENANT_ID, openid_metadata_url: teams.openIdMetadataUrl, login_url: teams.loginUrl },
      });
      channelId = created.channel.id;
      expect(created.endpoint).toBe(`/channels/chat/${channelId}`);
      // The password is never returned.
      expect(JSON.stringify(created.channel)).not.toContain(APP_PASSWORD);
    }, 60_000);

    afterAll(async () => {
      await instances.stop();
      await teams.close();
    });

    const post = async (body: ReturnType<typeof activity>, { to = 0, token = {} as TokenOptions | null, channel = channelId } = {}) =>
      fetch(instances.webhookUrl(channel, to), {
        method: "POST",
        headers: { "content-type": "application/json", ...(token === null ? {} : { authorization: `Bearer ${await teams.sign(body, token)}` }) },
        body: JSON.stringify(body),
      });

    it("answers a personal chat at the activity's serviceUrl with a token bought with the app's password; the chat is one conversation", async () => {
      const user = "megan";
      expect((await post(activity(teams, "1700000000001", user, "hello"))).status).toBe(200);
      await teams.waitFor(() => teams.textsIn(personal(user)).includes("Echo: hello"), "the reply to hello");
      expect((await post(activity(teams, "1700000000002", user, "again"), { to: 1 })).status).toBe(200);
      await teams.waitFor(() => teams.textsIn(personal(user)).includes("Echo: again"), "the reply to again");
      expect(teams.textsIn(personal(user))).toEqual(["Echo: hello", "Echo: again"]);

      const replies = teams.calls.filter(
        (call) => call.method === "POST" && call.body.type === "message" && call.path.startsWith(`/v3/conversations/${personal(user)}/`),
      );
      expect(replies.map((call) => call.path)).toEqual([`/v3/conversations/${personal(user)}/activities`, `/v3/conversations/${personal(user)}/activities`]);
      // The stand-in answers 401 to a token it did not issue: the replies carried the bot's.
      expect(replies.every((call) => call.authorization?.startsWith("Bearer ey"))).toBe(true);
      // A single-tenant bot buys its Bot Connector token in its own tenant.
      expect(teams.tokenRequests).toContainEqual({
        tenant: TENANT_ID,
        clientId: APP_ID,
        clientSecret: APP_PASSWORD,
        scope: "https://api.botframework.com/.default",
      });
      expect(await instances.history(channelId, threadOf(teams, user))).toEqual([
        "user: hello",
        "assistant: Echo: hello",
        "user: again",
        "assistant: Echo: again",
      ]);
    });

    it("refuses a delivery without the Bot Connector's token, or with a token that is not its token for this bot: 401, nothing runs", async () => {
      const user = "mallory";
      const forgeries: (TokenOptions | null)[] = [
        null,
        { unpublishedKey: true },
        { unendorsedKey: true },
        { audience: "another-bot-app-id" },
        { expiresInS: -600 },
        // The token names another serviceUrl than the activity's, where the reply would go.
        { serviceUrl: "https://smba.trafficmanager.net/amer/" },
      ];
      for (const [index, token] of forgeries.entries()) {
        expect((await post(activity(teams, `17000000001${index}`, user, `forged ${index}`), { to: index % 2, token })).status, JSON.stringify(token)).toBe(401);
      }
      expect(await instances.history(channelId, threadOf(teams, user))).toEqual([]);
      expect(teams.calls.filter((call) => call.path.includes(personal(user)))).toEqual([]);
    });

    it("answers an activity the Bot Connector delivers again (same id), to either instance, once", async () => {
      const user = "adele";
      for (const to of [0, 1, 0]) expect((await post(activity(teams, "1700000000201", user, "once"), { to })).status).toBe(200);
      expect((await post(activity(teams, "1700000000202", user, "after"), { to: 1 })).status).toBe(200);
      await teams.waitFor(() => teams.textsIn(personal(user)).includes("Echo: after"), "the reply to after");
      expect(teams.textsIn(personal(user))).toEqual(["Echo: once", "Echo: after"]);
      expect(await instances.history(channelId, threadOf(teams, user))).toEqual([
        "user: once",
        "assistant: Echo: once",
        "user: after",
        "assistant: Echo: after",
      ]);
    });

    it("offers a flow's suggestions as buttons on its reply (an Adaptive Card); a button pressed runs the flow with its suggestion", async () => {
      const menuChannel = (
        await instances.admin.createChannel({
          tenantId: instances.tenantId,
          flow: "menu",
          type: "teams",
          settings: {
            app_id: APP_ID,
            app_password: APP_PASSWORD,
            tenant_id: TENANT_ID,
            openid_metadata_url: teams.openIdMetadataUrl,
            login_url: teams.loginUrl,
          },
        })
      ).channel.id;
      const user = "nestor";
      expect((await post(activity(teams, "1700000000401", user, "menu"), { channel: menuChannel })).status).toBe(200);
      await teams.waitFor(() => teams.messagesIn(personal(user)).some((message) => message.buttons.length === 2), "the reply edited to carry its buttons");
      const [reply] = teams.messagesIn(personal(user));
      expect(reply?.text).toBe("Which fruit?");
      expect(reply?.buttons.map((button) => button.title)).toEqual(["Apple", "Banana"]);
      // Teams sends an Action.Submit as a message activity with the button's data as its value.
      const press = activity(teams, "1700000000402", user, undefined, { replyToId: reply?.id, value: reply?.buttons[1]?.data });
      expect((await post(press, { to: 1, channel: menuChannel })).status).toBe(200);
      await teams.waitFor(() => teams.textsIn(personal(user)).includes("You chose Banana"), "the answer to the button pressed");
      expect(await instances.history(menuChannel, threadOf(teams, user))).toEqual([
        "user: menu",
        "assistant: Which fruit?",
        "user: Banana",
        "assistant: You chose Banana",
      ]);
    });

    it("a multi-tenant bot (no tenant_id) buys its Bot Connector token at botframework.com", async () => {
      const other = await instances.admin.createChannel({
        tenantId: instances.tenantId,
        flow: "echo",
        type: "teams",
        settings: { app_id: APP_ID, app_password: APP_PASSWORD, openid_metadata_url: teams.openIdMetadataUrl, login_url: teams.loginUrl },
      });
      const user = "lidia";
      const body = activity(teams, "1700000000301", user, "multi");
      const answered = await fetch(instances.webhookUrl(other.channel.id, 1), {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${await teams.sign(body)}` },
        body: JSON.stringify(body),
      });
      expect(answered.status).toBe(200);
      await teams.waitFor(() => teams.textsIn(personal(user)).includes("Echo: multi"), "the multi-tenant bot's reply");
      expect(teams.tokenRequests).toContainEqual({
        tenant: "botframework.com",
        clientId: APP_ID,
        clientSecret: APP_PASSWORD,
        scope: "https://api.botframework.com/.default",
      });
    });
  });
}

teamsSuite("Teams on SQLite", sqliteDatabase);
describeWithPostgres("Teams on Postgres", (serverUrl) => teamsSuite("on one Postgres database", () => postgresDatabase(serverUrl)));
