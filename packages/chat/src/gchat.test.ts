/**
 * Google Chat through `@chat-adapter/gchat`, unchanged, on real SQLite and Postgres over real
 * HTTP: what can be run without Google. Google signs each delivery with a bearer token whose
 * keys the adapter fetches from Google's own addresses (no option points them elsewhere), and
 * the service account's access token comes from Google's token endpoint: a delivery Google
 * signed, and so a reply, cannot be made here. What is tested is what a request that is not
 * Google's gets: nothing, whatever the process's `GOOGLE_CHAT_*` variables say.
 */
import { generateKeyPairSync } from "node:crypto";
import { describeWithPostgres } from "@channelkit/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postgresDatabase, sqliteDatabase, type TestDatabase, TwoInstances } from "./test-services.js";

const SECRET_KEY = "6f".repeat(32);
const PROJECT_NUMBER = "123456789012";
const SPACE = "spaces/AAAAdm1";

/** A service account's JSON key as Google gives it, with a key made here. */
const serviceAccount = JSON.stringify({
  type: "service_account",
  project_id: "channelkit-test",
  private_key_id: "0123456789abcdef",
  private_key: generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({ format: "pem", type: "pkcs8" }),
  client_email: "helper@channelkit-test.iam.gserviceaccount.com",
  client_id: "100000000000000000001",
  token_uri: "https://oauth2.googleapis.com/token",
});

/** A direct message to the app, as Google delivers it to an add-on's HTTP endpoint. */
function directMessage(id: string, text: string) {
  const space = { name: SPACE, type: "DM", spaceType: "DIRECT_MESSAGE" };
  const sender = { name: "users/111", displayName: "Ada", type: "HUMAN" };
  return {
    commonEventObject: { hostApp: "CHAT", platform: "WEB" },
    chat: {
      user: sender,
      eventTime: new Date().toISOString(),
      messagePayload: { space, message: { name: `${SPACE}/messages/${id}`, sender, text, createTime: new Date().toISOString(), space } },
    },
  };
}

/** The same message as a Workspace Events subscription pushes it through Pub/Sub. */
function pubSubPush(id: string, text: string) {
  const message = {
    name: `${SPACE}/messages/${id}`,
    sender: { name: "users/111", displayName: "Ada", type: "HUMAN" },
    text: `@channelkit ${text}`,
    createTime: new Date().toISOString(),
    space: { name: SPACE },
  };
  return {
    message: {
      data: Buffer.from(JSON.stringify({ message })).toString("base64"),
      attributes: { "ce-type": "google.workspace.chat.message.v1.created", "ce-subject": `//chat.googleapis.com/${SPACE}` },
      messageId: id,
      publishTime: new Date().toISOString(),
    },
    subscription: "projects/channelkit-test/subscriptions/chat",
  };
}

function googleChatSuite(name: string, makeDatabase: () => Promise<TestDatabase>) {
  describe(name, () => {
    const instances = new TwoInstances();
    const createChannel = (settings: Record<string, unknown>) =>
      instances.admin.createChannel({ tenantId: instances.tenantId, flow: "echo", type: "gchat", settings });
    const settings = { service_account: serviceAccount, project_number: PROJECT_NUMBER, endpoint_url: "https://chat.example.com/channels/chat/x" };

    beforeAll(async () => {
      await instances.start(await makeDatabase(), SECRET_KEY);
    }, 60_000);

    afterAll(async () => {
      await instances.stop();
    });

    const post = (channelId: string, body: unknown, headers: Record<string, string> = {}, to = 0) =>
      fetch(instances.webhookUrl(channelId, to), { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });

    it("keeps the service account's key sealed, and refuses a key that is not one, or a project id given for the project number", async () => {
      const created = await createChannel(settings);
      expect(created.channel.type).toBe("gchat");
      expect(JSON.stringify(created)).not.toContain("PRIVATE KEY");
      await expect(createChannel({ ...settings, service_account: "not json" })).rejects.toThrow(/service_account/);
      await expect(createChannel({ ...settings, service_account: JSON.stringify({ client_email: "a@b.c" }) })).rejects.toThrow(/private_key/);
      await expect(createChannel({ ...settings, project_number: "channelkit-test" })).rejects.toThrow(/project_number/);
      await expect(createChannel({ ...settings, endpoint_url: "http://chat.example.com/x" })).rejects.toThrow(/endpoint_url/);
    });

    it("refuses a delivery without Google's bearer token, or with another scheme, on either instance: 401, nothing runs", async () => {
      const { channel } = await createChannel(settings);
      expect((await post(channel.id, directMessage("m1", "hello"))).status).toBe(401);
      expect((await post(channel.id, directMessage("m2", "hello"), { authorization: "Basic aGVscGVyOnNlY3JldA==" }, 1)).status).toBe(401);
      expect(await instances.history(channel.id, `gchat:${SPACE}:dm`)).toEqual([]);
    });

    it("refuses an unsigned Pub/Sub push even when the process says GOOGLE_CHAT_DISABLE_SIGNATURE_VERIFICATION=true: the channel's settings alone decide", async () => {
      const { channel } = await createChannel(settings);
      const kept = process.env.GOOGLE_CHAT_DISABLE_SIGNATURE_VERIFICATION;
      // Read when the channel's bot is made, on its first delivery.
      process.env.GOOGLE_CHAT_DISABLE_SIGNATURE_VERIFICATION = "true";
      try {
        expect((await post(channel.id, pubSubPush("p1", "let me in"))).status).toBe(401);
        expect((await post(channel.id, directMessage("p2", "let me in"), {}, 1)).status).toBe(401);
      } finally {
        if (kept === undefined) delete process.env.GOOGLE_CHAT_DISABLE_SIGNATURE_VERIFICATION;
        else process.env.GOOGLE_CHAT_DISABLE_SIGNATURE_VERIFICATION = kept;
      }
      const threads = [`gchat:${SPACE}:${Buffer.from(`${SPACE}/messages/p1`).toString("base64url")}`, `gchat:${SPACE}:dm`];
      for (const thread of threads) expect(await instances.history(channel.id, thread)).toEqual([]);
    });
  });
}

googleChatSuite("Google Chat on SQLite", sqliteDatabase);
describeWithPostgres("Google Chat on Postgres", (serverUrl) => googleChatSuite("on one Postgres database", () => postgresDatabase(serverUrl)));
