import { describe, expect, it } from "vitest";
import { adminOk, channelAdminPath, tokenFor } from "./admin-client.js";
import { execute, expectError, ISO_TIMESTAMP, UUID } from "./client.js";
import type { Harness, TestChannel } from "./harness.js";
import { signatureHeader } from "./signing.js";
import { fetch } from "./conformance.js";

/** Path of a webhook route. */
export function webhookPath(clientId: string, route: "startConversation" | "newMessage"): string {
  return `/channels/webhook/${encodeURIComponent(clientId)}/${route}`;
}

interface WebhookOptions {
  contentType?: string | null;
  signature?: string;
}

/** `POST` to a webhook route: a plain object as JSON, a string exactly as given. */
export function webhookPost(h: Harness, clientId: string, route: "startConversation" | "newMessage", body: unknown, options: WebhookOptions = {}) {
  const headers = new Headers();
  const contentType = options.contentType === undefined ? "application/json" : options.contentType;
  if (contentType !== null) headers.set("content-type", contentType);
  if (options.signature !== undefined) headers.set("x-service-signature", options.signature);
  return fetch(h.url(webhookPath(clientId, route)), { method: "POST", headers, body: typeof body === "string" ? body : JSON.stringify(body) });
}

/** A webhook event as the routes answer it. */
interface WebhookEvent {
  type: string;
  data: Record<string, any>;
  timestamp: string;
}

async function ok<T>(response: Response): Promise<T> {
  const text = await response.text();
  expect(response.status, text).toBe(200);
  expect(response.headers.get("content-type")).toMatch(/^application\/json\b/);
  return JSON.parse(text) as T;
}

/** A webhook channel of `flow` with the languages en_US and fr_FR, and its client id. */
async function webhookChannel(h: Harness, flow = "echo", extra: Partial<Parameters<Harness["channel"]>[0]> = {}): Promise<TestChannel & { clientId: string }> {
  const channel = await h.channel({ flow, type: "webhook", languages: ["en_US", "fr_FR"], ...extra });
  const clientId = (channel.view as { client_id?: string }).client_id;
  if (!clientId) throw new Error("a webhook channel has a client_id");
  return { ...channel, clientId };
}

async function start(h: Harness, clientId: string, body: unknown = { language: "en_US", integrationContext: {} }) {
  return ok<{ conversation: { conversation: Record<string, any>; newMessages: { newEvents: WebhookEvent[] } } }>(
    await webhookPost(h, clientId, "startConversation", body),
  );
}

async function say(h: Harness, clientId: string, conversationId: string, userInput: string): Promise<WebhookEvent[]> {
  const body = await ok<{ conversation: { newEvents: WebhookEvent[] } }>(await webhookPost(h, clientId, "newMessage", { conversationId, userInput }));
  expect(Object.keys(body)).toEqual(["conversation"]);
  expect(Object.keys(body.conversation)).toEqual(["newEvents"]);
  return body.conversation.newEvents;
}

const texts = (events: WebhookEvent[]) => events.map((event) => event.data.rawContent);

/** The webhook channel: `startConversation` and `newMessage` for any HTTP client. */
export function webhookTests(h: Harness): void {
  describe("webhook channel", () => {
    describe("shapes", () => {
      it("startConversation answers the record with START then the greeting, and the greeting as the new event", async () => {
        const channel = await webhookChannel(h);
        const body = await start(h, channel.clientId, { language: "fr_FR", integrationContext: { userId: "u-1" } });
        expect(Object.keys(body)).toEqual(["conversation"]);
        expect(Object.keys(body.conversation).sort()).toEqual(["conversation", "newMessages"]);
        const record = body.conversation.conversation;
        expect(Object.keys(record).sort()).toEqual(["context", "createdAt", "eventStack", "id", "labelIds", "status", "updatedAt"]);
        expect(record.id).toMatch(UUID);
        expect(record.status).toBe("ACTIVE");
        expect(record.labelIds).toEqual([]);
        expect(record.createdAt).toMatch(ISO_TIMESTAMP);
        expect(record.updatedAt).toMatch(ISO_TIMESTAMP);
        expect(Date.parse(record.updatedAt)).toBeGreaterThanOrEqual(Date.parse(record.createdAt));

        const greeting = {
          type: "BOT_MESSAGE",
          data: {
            content: "Hello! How can I help you?",
            rawContent: "Hello! How can I help you?",
            suggestions: ["Echo test"],
            expectedResponseType: "textOrSuggestion",
            sources: [],
          },
          timestamp: expect.stringMatching(ISO_TIMESTAMP),
        };
        expect(record.eventStack).toEqual([{ type: "START", data: {}, timestamp: record.createdAt }, greeting]);
        expect(body.conversation.newMessages).toEqual({ newEvents: [greeting] });
        expect(record.context).toEqual({
          variables: {},
          uploadedFiles: {},
          channel: { id: channel.id, version: "1", release: "prod", languages: ["en_US", "fr_FR"], channelType: "webhook" },
          language: "fr_FR",
          shouldClassifyNextMessage: true,
          digressionTypeNextMessage: "NONE",
          graphReaderConversationalStack: [],
          nextMessageExpectedType: "textOrSuggestion",
          entities: [],
        });
      });

      it("newMessage answers { conversation: { newEvents } } with the flow's reply; content is HTML-escaped, rawContent raw", async () => {
        const channel = await webhookChannel(h);
        const id = (await start(h, channel.clientId)).conversation.conversation.id;
        const events = await say(h, channel.clientId, id, `<b>Tom & "Jerry"</b>'s`);
        expect(events).toEqual([
          {
            type: "BOT_MESSAGE",
            data: {
              content: "Echo: &lt;b&gt;Tom &amp; &quot;Jerry&quot;&lt;/b&gt;&#39;s",
              rawContent: `Echo: <b>Tom & "Jerry"</b>'s`,
              suggestions: [],
              expectedResponseType: "text",
              sources: [],
            },
            timestamp: expect.stringMatching(ISO_TIMESTAMP),
          },
        ]);
      });
    });

    describe("runs, turns and state, as on the API channel", () => {
      it("stores the greeting, each user input and each reply with contiguous turns; the flow's state carries over; the language is kept", async () => {
        const channel = await webhookChannel(h);
        const id = (await start(h, channel.clientId, { language: "fr_FR", integrationContext: {} })).conversation.conversation.id;
        expect(texts(await say(h, channel.clientId, id, "one"))).toEqual(["Echo: one"]);
        expect(texts(await say(h, channel.clientId, id, "two"))).toEqual(["Echo: two"]);
        const messages = await h.target.storage.listRecentMessages(id, 10);
        expect(messages.map((m) => [m.turnIndex, m.role, m.content])).toEqual([
          [0, "assistant", "Hello! How can I help you?"],
          [1, "user", "one"],
          [2, "assistant", "Echo: one"],
          [3, "user", "two"],
          [4, "assistant", "Echo: two"],
        ]);
        const conversation = await h.target.storage.findConversation(id);
        expect(conversation).toMatchObject({ channelId: channel.id, tenantId: channel.tenantId, language: "fr_FR", mode: "bot", flowState: { turn: 2 } });
        const lastRun = await h.target.storage.findRun(messages[4]?.runId as string);
        expect(lastRun).toMatchObject({ status: "success", result: { echo: "two", turn: 2 } });
      });

      it("a flow without a start opens the conversation silently; a pause asks, and the next message answers", async () => {
        const channel = await webhookChannel(h, "ask");
        const opened = await start(h, channel.clientId);
        expect(opened.conversation.conversation.eventStack.map((e: WebhookEvent) => e.type)).toEqual(["START"]);
        expect(opened.conversation.newMessages.newEvents).toEqual([]);
        const id = opened.conversation.conversation.id;
        expect(texts(await say(h, channel.clientId, id, "hi"))).toEqual(["What is your name?"]);
        expect(texts(await say(h, channel.clientId, id, "Ada"))).toEqual(["Nice to meet you, Ada!"]);
      });

      it("a handover is stored as on execute (livechat_waiting); a failing flow answers what it produced and is stored as an error", async () => {
        const handover = await webhookChannel(h, "handover");
        const id = (await start(h, handover.clientId)).conversation.conversation.id;
        expect(texts(await say(h, handover.clientId, id, "agent please"))).toEqual(["Connecting you to an agent"]);
        expect((await h.target.storage.findConversation(id))?.mode).toBe("livechat_waiting");

        const failing = await webhookChannel(h, "fail");
        const failingId = (await start(h, failing.clientId)).conversation.conversation.id;
        expect(texts(await say(h, failing.clientId, failingId, "go"))).toEqual(["Working on it"]);
        const [, reply] = await h.target.storage.listRecentMessages(failingId, 10);
        expect(await h.target.storage.findRun(reply?.runId as string)).toMatchObject({ status: "error", error: "flow failed on purpose" });
      });

      it("concurrent newMessage calls on one conversation keep turns contiguous, nothing lost", async () => {
        const channel = await webhookChannel(h);
        const id = (await start(h, channel.clientId)).conversation.conversation.id;
        const inputs = Array.from({ length: 12 }, (_, i) => `message ${i}`);
        const replies = await Promise.all(inputs.map((input) => say(h, channel.clientId, id, input)));
        expect(replies.map(texts)).toEqual(inputs.map((input) => [`Echo: ${input}`]));
        const messages = await h.target.storage.listRecentMessages(id, 100);
        expect(messages.map((m) => m.turnIndex)).toEqual(Array.from({ length: 25 }, (_, i) => i));
        expect(
          messages
            .filter((m) => m.role === "user")
            .map((m) => m.content)
            .sort(),
        ).toEqual([...inputs].sort());
        expect((await h.target.storage.findConversation(id))?.flowState).toEqual({ turn: 12 });
      });
    });

    describe("errors, in the envelope; nothing is stored", () => {
      it("404 channel_not_found for an unknown client id, on both routes", async () => {
        await expectError(await webhookPost(h, "no-such-client", "startConversation", { language: "en_US" }), 404, "channel_not_found");
        await expectError(
          await webhookPost(h, "no-such-client", "newMessage", { conversationId: crypto.randomUUID(), userInput: "hi" }),
          404,
          "channel_not_found",
        );
      });

      it("409 channel_inactive and 410 channel_archived, on both routes", async () => {
        const channel = await webhookChannel(h);
        const id = (await start(h, channel.clientId)).conversation.conversation.id;
        await h.update(channel, { state: "inactive" });
        await expectError(await webhookPost(h, channel.clientId, "startConversation", { language: "en_US" }), 409, "channel_inactive");
        await expectError(await webhookPost(h, channel.clientId, "newMessage", { conversationId: id, userInput: "hi" }), 409, "channel_inactive");
        await h.update(channel, { state: "archived" });
        await expectError(await webhookPost(h, channel.clientId, "startConversation", { language: "en_US" }), 410, "channel_archived");
        await expectError(await webhookPost(h, channel.clientId, "newMessage", { conversationId: id, userInput: "hi" }), 410, "channel_archived");
        expect(await h.target.storage.listRecentMessages(id, 10)).toHaveLength(1);
      });

      it("422 validation_error for a language that is missing, not of the form xx_XX, or not active on the channel", async () => {
        const channel = await webhookChannel(h);
        for (const body of [
          {},
          { language: "en" },
          { language: "EN_us" },
          { language: 7 },
          { language: "de_DE" },
          { language: "en_US", integrationContext: "x" },
          [],
          null,
        ]) {
          await expectError(await webhookPost(h, channel.clientId, "startConversation", body), 422, "validation_error");
        }
      });

      it("422 validation_error for a userInput that is missing, empty, not a string or over 10,000 characters; 10,000 is accepted", async () => {
        const channel = await webhookChannel(h);
        const id = (await start(h, channel.clientId)).conversation.conversation.id;
        for (const body of [
          { conversationId: id },
          { conversationId: id, userInput: "" },
          { conversationId: id, userInput: 42 },
          { conversationId: id, userInput: "é".repeat(10_001) },
          { userInput: "hi" },
        ]) {
          await expectError(await webhookPost(h, channel.clientId, "newMessage", body), 422, "validation_error");
        }
        expect(texts(await say(h, channel.clientId, id, "é".repeat(10_000)))).toEqual([`Echo: ${"é".repeat(10_000)}`]);
        expect(await h.target.storage.listRecentMessages(id, 10)).toHaveLength(3);
      });

      it("404 conversation_not_found for an unknown conversationId, or one of another channel (webhook or API, same tenant or not)", async () => {
        const channel = await webhookChannel(h);
        const other = await webhookChannel(h, "echo", { tenantId: channel.tenantId });
        const otherId = (await start(h, other.clientId)).conversation.conversation.id;
        const api = await h.channel({ flow: "echo", tenantId: channel.tenantId });
        const apiRun = (await (await execute(h, api.key, { payload: "hi" })).json()) as { conversation_id: string };
        for (const conversationId of [crypto.randomUUID(), "not-a-uuid", otherId, apiRun.conversation_id]) {
          await expectError(await webhookPost(h, channel.clientId, "newMessage", { conversationId, userInput: "hi" }), 404, "conversation_not_found");
        }
        expect(await h.target.storage.listRecentMessages(otherId, 10)).toHaveLength(1);
      });

      it("415 for a body that is not JSON, 422 for malformed JSON", async () => {
        const channel = await webhookChannel(h);
        for (const route of ["startConversation", "newMessage"] as const) {
          await expectError(
            await webhookPost(h, channel.clientId, route, "language=en_US", { contentType: "application/x-www-form-urlencoded" }),
            415,
            "unsupported_media_type",
          );
          await expectError(await webhookPost(h, channel.clientId, route, "{}", { contentType: null }), 415, "unsupported_media_type");
          await expectError(await webhookPost(h, channel.clientId, route, "{not json"), 422, "validation_error");
        }
      });

      it("the webhook channel's key is refused on the API routes with 403 wrong_channel_type", async () => {
        const channel = await webhookChannel(h);
        await expectError(await execute(h, channel.key, { payload: "hi" }), 403, "wrong_channel_type");
      });
    });

    describe("the webhook secret", () => {
      it("comes with the channel, shown once; with require_signature both routes need X-Service-Signature, verified as on execute", async () => {
        const channel = await webhookChannel(h, "echo", { requireSignature: true });
        const secret = channel.signingSecret as string;
        expect(secret).toEqual(expect.any(String));
        const startBody = JSON.stringify({ language: "en_US", integrationContext: {} });
        await expectError(await webhookPost(h, channel.clientId, "startConversation", startBody), 401, "signature_required");
        await expectError(
          await webhookPost(h, channel.clientId, "startConversation", startBody, { signature: signatureHeader("wrong-secret", startBody) }),
          401,
          "invalid_signature",
        );
        const old = Math.floor(Date.now() / 1000) - 301;
        await expectError(
          await webhookPost(h, channel.clientId, "startConversation", startBody, { signature: signatureHeader(secret, startBody, old) }),
          401,
          "signature_expired",
        );
        const started = await ok<{ conversation: { conversation: { id: string } } }>(
          await webhookPost(h, channel.clientId, "startConversation", startBody, { signature: signatureHeader(secret, startBody) }),
        );
        const messageBody = JSON.stringify({ conversationId: started.conversation.conversation.id, userInput: "signed" });
        await expectError(await webhookPost(h, channel.clientId, "newMessage", messageBody), 401, "signature_required");
        const reply = await ok<{ conversation: { newEvents: WebhookEvent[] } }>(
          await webhookPost(h, channel.clientId, "newMessage", messageBody, { signature: signatureHeader(secret, messageBody) }),
        );
        expect(texts(reply.conversation.newEvents)).toEqual(["Echo: signed"]);

        // Rotated by an admin: the previous secret stops at once.
        const token = await tokenFor(h, channel.tenantId);
        const rotated = await adminOk(h, "POST", channelAdminPath(channel.id, "rotate-signing-secret"), { tenant: channel.tenantId, token });
        await expectError(
          await webhookPost(h, channel.clientId, "newMessage", messageBody, { signature: signatureHeader(secret, messageBody) }),
          401,
          "invalid_signature",
        );
        await ok(await webhookPost(h, channel.clientId, "newMessage", messageBody, { signature: signatureHeader(rotated.signing_secret, messageBody) }));
      });

      it("is not required by default: unsigned calls are served", async () => {
        const channel = await webhookChannel(h);
        expect(channel.signingSecret).toEqual(expect.any(String));
        expect(channel.view).toMatchObject({ has_signing_secret: true, config: { require_signature: false } });
        await start(h, channel.clientId);
      });
    });

    it("the admin PATCH sets the channel's active languages: a new one starts, a removed one is 422", async () => {
      const channel = await webhookChannel(h);
      const token = await tokenFor(h, channel.tenantId);
      const patched = await adminOk(h, "PATCH", channelAdminPath(channel.id), { tenant: channel.tenantId, token, body: { languages: ["de_DE", "fr_FR"] } });
      expect(patched.channel.languages).toEqual(["de_DE", "fr_FR"]);
      expect((await start(h, channel.clientId, { language: "de_DE" })).conversation.conversation.context.channel.languages).toEqual(["de_DE", "fr_FR"]);
      await expectError(await webhookPost(h, channel.clientId, "startConversation", { language: "en_US" }), 422, "validation_error");
    });

    it("each route has a CORS preflight", async () => {
      const channel = await webhookChannel(h);
      for (const route of ["startConversation", "newMessage"] as const) {
        const response = await fetch(h.url(webhookPath(channel.clientId, route)), {
          method: "OPTIONS",
          headers: { origin: "https://app.example", "access-control-request-method": "POST" },
        });
        expect(response.status).toBe(204);
        expect(response.headers.get("access-control-allow-methods")).toBe("POST, OPTIONS");
        // newMessage takes an Idempotency-Key too (docs/webhook.md).
        expect(response.headers.get("access-control-allow-headers")).toBe(
          route === "newMessage" ? "Content-Type, X-Service-Signature, Idempotency-Key" : "Content-Type, X-Service-Signature",
        );
        expect(response.headers.get("access-control-allow-origin")).toBe("https://app.example");
      }
    });
  });
}
