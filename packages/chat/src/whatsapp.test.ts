/**
 * WhatsApp through `@chat-adapter/whatsapp`, unchanged: the Graph API is a stand-in on
 * 127.0.0.1 (the channel's `api_url`), and deliveries are signed with the app secret as Meta
 * signs them (`X-Hub-Signature-256`). Two services on one database, SQLite then Postgres.
 */
import { createHmac } from "node:crypto";
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { describeWithPostgres } from "@channelkit/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postgresDatabase, sqliteDatabase, type TestDatabase, TwoInstances } from "./test-services.js";

const SECRET_KEY = "4d".repeat(32);
const ACCESS_TOKEN = "EAAG-test-access-token";
const APP_SECRET = "whatsapp-app-secret";
const VERIFY_TOKEN = "verify-me-please";
const PHONE_NUMBER_ID = "109876543210";

/** A message Meta posted on the business number's behalf: who to, what, with which token. */
interface Sent {
  authorization: string | undefined;
  path: string;
  to: string;
  text: string;
}

/** The Graph API's messages endpoint on 127.0.0.1, recording what the bot sends. */
class GraphStandIn {
  readonly sent: Sent[] = [];
  #server: Server | undefined;
  #next = 1;
  url = "";

  async start(): Promise<void> {
    this.#server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        const body = JSON.parse(Buffer.concat(chunks).toString() || "{}") as { to?: string; text?: { body?: string } };
        this.sent.push({ authorization: request.headers.authorization, path: request.url ?? "", to: String(body.to), text: String(body.text?.body) });
        response.writeHead(200, { "content-type": "application/json" });
        response.end(
          JSON.stringify({ messaging_product: "whatsapp", contacts: [{ input: body.to, wa_id: body.to }], messages: [{ id: `wamid.sent${this.#next++}` }] }),
        );
      });
    });
    this.#server.listen(0, "127.0.0.1");
    await once(this.#server, "listening");
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  textsTo(waId: string): string[] {
    return this.sent.filter((sent) => sent.to === waId).map((sent) => sent.text);
  }

  async close(): Promise<void> {
    this.#server?.closeAllConnections();
    await new Promise((resolve) => this.#server?.close(resolve));
  }
}

/** A text message from `waId` to the business number, as Meta delivers it. */
function delivery(messageId: string, waId: string, text: string) {
  return {
    object: "whatsapp_business_account",
    entry: [
      {
        id: "WABA_ID",
        changes: [
          {
            field: "messages",
            value: {
              messaging_product: "whatsapp",
              metadata: { display_phone_number: "15550001111", phone_number_id: PHONE_NUMBER_ID },
              contacts: [{ profile: { name: "Bea" }, wa_id: waId }],
              messages: [{ from: waId, id: messageId, timestamp: String(Math.floor(Date.now() / 1000)), type: "text", text: { body: text } }],
            },
          },
        ],
      },
    ],
  };
}

function whatsAppSuite(name: string, makeDatabase: () => Promise<TestDatabase>) {
  describe(name, () => {
    const graph = new GraphStandIn();
    const warnings: string[] = [];
    const instances = new TwoInstances();
    let channelId: string;

    beforeAll(async () => {
      await graph.start();
      await instances.start(await makeDatabase(), SECRET_KEY, () => ({ logger: { warn: (message: string) => void warnings.push(message), error() {} } }));
      const created = await instances.admin.createChannel({
        tenantId: instances.tenantId,
        flow: "echo",
        type: "whatsapp",
        settings: { access_token: ACCESS_TOKEN, app_secret: APP_SECRET, verify_token: VERIFY_TOKEN, phone_number_id: PHONE_NUMBER_ID, api_url: graph.url },
      });
      channelId = created.channel.id;
      // Secrets are never returned.
      expect(JSON.stringify(created.channel)).not.toContain(ACCESS_TOKEN);
      expect(JSON.stringify(created.channel)).not.toContain(APP_SECRET);
    }, 60_000);

    afterAll(async () => {
      await instances.stop();
      await graph.close();
    });

    const post = (body: unknown, { to = 0, secret = APP_SECRET }: { to?: number; secret?: string } = {}) => {
      const raw = JSON.stringify(body);
      return fetch(instances.webhookUrl(channelId, to), {
        method: "POST",
        headers: { "content-type": "application/json", "x-hub-signature-256": `sha256=${createHmac("sha256", secret).update(raw).digest("hex")}` },
        body: raw,
      });
    };

    it("answers Meta's verification with the challenge for the channel's verify token, 403 for another", async () => {
      const verify = (token: string) => fetch(`${instances.webhookUrl(channelId, 1)}?hub.mode=subscribe&hub.verify_token=${token}&hub.challenge=1158201444`);
      const ok = await verify(VERIFY_TOKEN);
      expect([ok.status, await ok.text()]).toEqual([200, "1158201444"]);
      expect((await verify("guess")).status).toBe(403);
    });

    it("answers a user's message through the Graph API at api_url with the channel's access token; the user is one conversation", async () => {
      expect((await post(delivery("wamid.in1", "15551230001", "hola"))).status).toBe(200);
      await expect.poll(() => graph.textsTo("15551230001")).toEqual(["Echo: hola"]);
      expect((await post(delivery("wamid.in2", "15551230001", "otra vez"), { to: 1 })).status).toBe(200);
      await expect.poll(() => graph.textsTo("15551230001")).toEqual(["Echo: hola", "Echo: otra vez"]);
      const mine = graph.sent.filter((sent) => sent.to === "15551230001");
      expect(mine.every((sent) => sent.authorization === `Bearer ${ACCESS_TOKEN}` && sent.path === `/v25.0/${PHONE_NUMBER_ID}/messages`)).toBe(true);
      expect(await instances.history(channelId, `whatsapp:${PHONE_NUMBER_ID}:15551230001`)).toEqual([
        "user: hola",
        "assistant: Echo: hola",
        "user: otra vez",
        "assistant: Echo: otra vez",
      ]);
    });

    it("refuses a delivery not signed with the app secret: 401, said once in the log, nothing runs", async () => {
      warnings.length = 0;
      const refused = await post(delivery("wamid.forged", "15551230002", "forged"), { secret: "not-the-secret" });
      expect(refused.status).toBe(401);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("delivery_not_verified");
      expect(warnings.filter((warning) => warning.includes(channelId))).toEqual([
        `channelkit chat: a delivery to whatsapp channel ${channelId} was refused: it is not signed with the channel's secret`,
      ]);
      expect(await instances.history(channelId, `whatsapp:${PHONE_NUMBER_ID}:15551230002`)).toEqual([]);
      expect(graph.textsTo("15551230002")).toEqual([]);
    });

    it("answers a message Meta delivers again (same message id), to either instance, once", async () => {
      for (const to of [0, 1, 0]) expect((await post(delivery("wamid.again", "15551230003", "once"), { to })).status).toBe(200);
      expect((await post(delivery("wamid.after", "15551230003", "after"), { to: 1 })).status).toBe(200);
      await expect.poll(() => graph.textsTo("15551230003")).toEqual(["Echo: once", "Echo: after"]);
      expect(await instances.history(channelId, `whatsapp:${PHONE_NUMBER_ID}:15551230003`)).toEqual([
        "user: once",
        "assistant: Echo: once",
        "user: after",
        "assistant: Echo: after",
      ]);
    });
  });
}

whatsAppSuite("WhatsApp on SQLite", sqliteDatabase);
describeWithPostgres("WhatsApp on Postgres", (serverUrl) => whatsAppSuite("on one Postgres database", () => postgresDatabase(serverUrl)));
