import { DefaultChatTransport, readUIMessageStream, type UIMessage } from "ai";
import { describe, expect, it } from "vitest";
import { adminOk, channelAdminPath, tokenFor } from "./admin-client.js";
import { expectError, readHistory, UUID } from "./client.js";
import type { Harness, TestChannel } from "./harness.js";
import { readSse, runIds, streamedText } from "./sse.js";
import { fetch } from "./conformance.js";

const CONFIG_PATH = "/public/widget/config";
const CHAT_PATH = "/public/widget/chat";
const APP = "https://app.example";

interface WidgetRequest {
  key?: string | null;
  origin?: string;
  acceptLanguage?: string;
  contentType?: string | null;
}

function headersOf(request: WidgetRequest): Headers {
  const headers = new Headers();
  if (request.key) headers.set("authorization", `Bearer ${request.key}`);
  if (request.origin) headers.set("origin", request.origin);
  if (request.acceptLanguage) headers.set("accept-language", request.acceptLanguage);
  return headers;
}

function getConfig(h: Harness, request: WidgetRequest, query = ""): Promise<Response> {
  return fetch(h.url(CONFIG_PATH + query), { headers: headersOf(request) });
}

function postChat(h: Harness, request: WidgetRequest, body: unknown): Promise<Response> {
  const headers = headersOf(request);
  const contentType = request.contentType === undefined ? "application/json" : request.contentType;
  if (contentType !== null) headers.set("content-type", contentType);
  return fetch(h.url(CHAT_PATH), { method: "POST", headers, body: typeof body === "string" ? body : JSON.stringify(body) });
}

/** A public channel allowing {@link APP}, with English and French. */
function widgetChannel(h: Harness, extra: Partial<Parameters<Harness["channel"]>[0]> = {}): Promise<TestChannel> {
  return h.channel({ flow: "echo", mode: "public", allowedOrigins: [APP], languages: ["en_US", "fr_FR"], ...extra });
}

/** The AI SDK chat request `DefaultChatTransport` sends for one new user message. */
function aiRequest(chatId: string, text: string, earlier: UIMessage[] = []) {
  return {
    id: chatId,
    messages: [...earlier, { id: crypto.randomUUID(), role: "user", parts: [{ type: "text", text }] }],
    trigger: "submit-message",
    messageId: undefined,
  };
}

async function streamed(response: Response) {
  const text = await response.clone().text();
  expect(response.status, text).toBe(200);
  expect(response.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
  expect(response.headers.get("x-vercel-ai-ui-message-stream")).toBe("v1");
  const { events } = await readSse(response);
  expect(events[0]?.type).toBe("data-run");
  expect(events.at(-1)?.type).toBe("finish");
  return { events, ids: runIds(events), text: streamedText(events) };
}

/** The widget channel: its configuration and its streamed chat, for publishable keys. */
export function widgetTests(h: Harness): void {
  describe("widget channel", () => {
    describe("keys, origins, states: as on execute, publishable keys only", () => {
      it("401 missing_api_key, 401 invalid_api_key, 403 public_key_required for a server key, on both routes", async () => {
        const server = await h.channel({ flow: "echo" });
        for (const send of [(r: WidgetRequest) => getConfig(h, r), (r: WidgetRequest) => postChat(h, r, { payload: "hi" })]) {
          await expectError(await send({ key: null }), 401, "missing_api_key");
          await expectError(await send({ key: `svc_pub_${"Zz9".repeat(15)}` }), 401, "invalid_api_key");
          await expectError(await send({ key: server.key }), 403, "public_key_required");
        }
      });

      it("403 origin_not_allowed for another origin; no Origin or an allowed one is served, and reflected", async () => {
        const channel = await widgetChannel(h);
        await expectError(await getConfig(h, { key: channel.key, origin: "https://evil.example" }), 403, "origin_not_allowed");
        await expectError(await postChat(h, { key: channel.key, origin: "https://evil.example" }, { payload: "hi" }), 403, "origin_not_allowed");
        expect((await getConfig(h, { key: channel.key })).status).toBe(200);
        const allowed = await getConfig(h, { key: channel.key, origin: APP });
        expect(allowed.status).toBe(200);
        expect(allowed.headers.get("access-control-allow-origin")).toBe(APP);
        await streamed(await postChat(h, { key: channel.key, origin: APP }, { payload: "hi" }));
      });

      it("409 channel_inactive, 410 channel_archived, 403 environment_mismatch, 403 wrong_channel_type", async () => {
        const inactive = await widgetChannel(h);
        await h.update(inactive, { state: "inactive" });
        await expectError(await getConfig(h, { key: inactive.key }), 409, "channel_inactive");
        await expectError(await postChat(h, { key: inactive.key }, { payload: "hi" }), 409, "channel_inactive");
        const archived = await widgetChannel(h);
        await h.update(archived, { state: "archived" });
        await expectError(await getConfig(h, { key: archived.key }), 410, "channel_archived");
        const moved = await widgetChannel(h);
        await h.update(moved, { environment: "staging" });
        await expectError(await postChat(h, { key: moved.key }, { payload: "hi" }), 403, "environment_mismatch");
        const webhook = await h.channel({ flow: "echo", type: "webhook", mode: "public" });
        await expectError(await getConfig(h, { key: webhook.key }), 403, "wrong_channel_type");
      });

      it("each route has its CORS preflight, with no key", async () => {
        // The chat takes a signature on a channel that requires one: its preflight allows it.
        for (const [path, methods, headers] of [
          [CONFIG_PATH, "GET, OPTIONS", "Authorization, Content-Type"],
          [CHAT_PATH, "POST, OPTIONS", "Authorization, Content-Type, X-Service-Signature"],
        ] as const) {
          const response = await fetch(h.url(path), { method: "OPTIONS", headers: { origin: APP, "access-control-request-method": "POST" } });
          expect(response.status).toBe(204);
          expect(response.headers.get("access-control-allow-methods")).toBe(methods);
          expect(response.headers.get("access-control-allow-headers")).toBe(headers);
          expect(response.headers.get("access-control-allow-origin")).toBe(APP);
          expect(response.headers.get("access-control-allow-credentials")).toBeNull();
        }
      });
    });

    describe("GET /public/widget/config", () => {
      it("answers { channel_id, locale, languages, strings, theme, features, default_stream } with the defaults", async () => {
        const channel = await widgetChannel(h);
        const response = await getConfig(h, { key: channel.key });
        expect(response.status).toBe(200);
        expect(response.headers.get("cache-control")).toBe("no-store");
        const config = (await response.json()) as Record<string, any>;
        expect(Object.keys(config).sort()).toEqual(["channel_id", "default_stream", "features", "languages", "locale", "strings", "theme"]);
        expect(config).toMatchObject({
          channel_id: channel.id,
          locale: "en_US",
          languages: ["en_US", "fr_FR"],
          theme: { primary_color: expect.stringMatching(/^#[0-9a-f]{6}$/i), position: "bottom-right", color_scheme: "auto" },
          // The suite's targets mount the agent inbox: live chat is on by default.
          features: { suggestions: true, history: true, livechat: true },
          default_stream: false,
        });
        for (const field of ["title", "subtitle", "greeting", "placeholder", "send", "retry"]) expect(config.strings[field]).toEqual(expect.any(String));
        expect(Object.keys(config.strings.errors).sort()).toEqual([
          "channel_archived",
          "channel_inactive",
          "generic",
          "invalid_api_key",
          "network",
          "origin_not_allowed",
        ]);
        expect(Object.keys(config.strings.livechat).sort()).toEqual([
          "agent",
          "leave",
          "livechat_active",
          "livechat_cancelled",
          "livechat_closed",
          "livechat_expired",
          "livechat_unavailable",
          "livechat_waiting",
        ]);
      });

      it("the requested locale, else the best match of Accept-Language, else the channel's first language", async () => {
        const channel = await widgetChannel(h);
        const locale = async (query: string, acceptLanguage?: string) =>
          (await (await getConfig(h, { key: channel.key, ...(acceptLanguage ? { acceptLanguage } : {}) }, query)).json()) as {
            locale: string;
            strings: { send: string };
          };
        expect(await locale("?locale=fr_FR")).toMatchObject({ locale: "fr_FR", strings: { send: "Envoyer" } });
        expect((await locale("", "fr-CA,fr;q=0.9,en;q=0.5")).locale).toBe("fr_FR");
        expect((await locale("", "de-DE,en-US;q=0.8")).locale).toBe("en_US");
        expect((await locale("", "de-DE, es;q=0.5")).locale).toBe("en_US");
        expect((await locale("?locale=de_DE", "fr")).locale).toBe("fr_FR");
        await expectError(await getConfig(h, { key: channel.key }, "?locale=french"), 422, "validation_error");
      });

      it("a channel overrides strings per language, theme and features through the admin PATCH; nonsense is 422", async () => {
        const channel = await widgetChannel(h);
        const token = await tokenFor(h, channel.tenantId);
        const widget = {
          strings: { fr_FR: { title: "Aide", suggestions: ["Où est ma commande ?"], errors: { network: "Réseau perdu" } } },
          theme: { primary_color: "#0f766e", position: "bottom-left" },
          features: { history: false, livechat: false },
        };
        const patched = await adminOk(h, "PATCH", channelAdminPath(channel.id), { tenant: channel.tenantId, token, body: { widget } });
        expect(patched.channel.widget).toEqual(widget);
        const fr = (await (await getConfig(h, { key: channel.key }, "?locale=fr_FR")).json()) as Record<string, any>;
        expect(fr.strings).toMatchObject({ title: "Aide", send: "Envoyer", suggestions: ["Où est ma commande ?"], errors: { network: "Réseau perdu" } });
        expect(fr.strings.errors.generic).toEqual(expect.any(String));
        expect(fr.theme).toEqual({ primary_color: "#0f766e", position: "bottom-left", color_scheme: "auto" });
        expect(fr.features).toEqual({ suggestions: true, history: false, livechat: false });
        const en = (await (await getConfig(h, { key: channel.key }, "?locale=en_US")).json()) as Record<string, any>;
        expect(en.strings.title).not.toBe("Aide");
        for (const bad of [
          { theme: { position: "top" } },
          { theme: { primary_color: "red" } },
          { strings: { french: { title: "x" } } },
          { colour: "red" },
          { strings: { en_US: { title: "" } } },
        ]) {
          const response = await fetch(h.url(channelAdminPath(channel.id)), {
            method: "PATCH",
            headers: { authorization: `Bearer ${token}`, "x-tenant-id": channel.tenantId, "content-type": "application/json" },
            body: JSON.stringify({ widget: bad }),
          });
          await expectError(response, 422, "validation_error");
        }
      });
    });

    describe("POST /public/widget/chat", () => {
      it("{ payload, conversation_id? } streams with execute's protocol; the conversation resumes", async () => {
        const channel = await widgetChannel(h);
        const first = await streamed(await postChat(h, { key: channel.key, origin: APP }, { payload: "hello" }));
        expect(first.text).toBe("Echo: hello");
        const second = await streamed(await postChat(h, { key: channel.key, origin: APP }, { payload: "again", conversation_id: first.ids.conversation_id }));
        expect(second.ids.conversation_id).toBe(first.ids.conversation_id);
        const history = await readHistory(h, channel.key, first.ids.conversation_id);
        expect(history.messages.map((m) => m.content)).toEqual(["hello", "Echo: hello", "again", "Echo: again"]);
      });

      it("the AI SDK chat request: the last user message's text parts; the chat id binds a conversation the first time and resumes it after", async () => {
        const channel = await widgetChannel(h);
        const chatId = `chat-${crypto.randomUUID()}`;
        const first = await streamed(await postChat(h, { key: channel.key }, aiRequest(chatId, "one")));
        expect(first.text).toBe("Echo: one");
        const earlier: UIMessage[] = [
          { id: "u1", role: "user", parts: [{ type: "text", text: "one" }] },
          { id: "a1", role: "assistant", parts: [{ type: "text", text: "Echo: one" }] },
        ];
        const second = await streamed(await postChat(h, { key: channel.key }, aiRequest(chatId, "two", earlier)));
        expect(second.ids.conversation_id).toBe(first.ids.conversation_id);
        expect(second.text).toBe("Echo: two");
        expect((await h.target.storage.findConversation(first.ids.conversation_id))?.flowState).toEqual({ turn: 2 });
        // Several text parts are one payload.
        const parts = {
          id: chatId,
          messages: [{ id: "u3", role: "user", parts: [{ type: "text", text: "th" }, { type: "step-start" }, { type: "text", text: "ree" }] }],
          trigger: "submit-message",
        };
        expect((await streamed(await postChat(h, { key: channel.key }, parts))).text).toBe("Echo: three");
      });

      it("a chat id that is a conversation of this channel resumes it; another channel's conversation id is never resumed", async () => {
        const channel = await widgetChannel(h);
        const started = await streamed(await postChat(h, { key: channel.key }, { payload: "start" }));
        const resumed = await streamed(await postChat(h, { key: channel.key }, aiRequest(started.ids.conversation_id, "resume")));
        expect(resumed.ids.conversation_id).toBe(started.ids.conversation_id);

        const other = await widgetChannel(h, { tenantId: channel.tenantId });
        const foreign = await streamed(await postChat(h, { key: other.key }, aiRequest(started.ids.conversation_id, "intruder")));
        expect(foreign.ids.conversation_id).not.toBe(started.ids.conversation_id);
        expect(foreign.ids.conversation_id).toMatch(UUID);
        const history = await readHistory(h, channel.key, started.ids.conversation_id);
        expect(history.messages.map((m) => m.content)).toEqual(["start", "Echo: start", "resume", "Echo: resume"]);
      });

      it("two first requests of one chat id at once make one conversation, both runs in it", async () => {
        const channel = await widgetChannel(h);
        const chatId = `race-${crypto.randomUUID()}`;
        const [a, b] = await Promise.all([
          postChat(h, { key: channel.key }, aiRequest(chatId, "a")),
          postChat(h, { key: channel.key }, aiRequest(chatId, "b")),
        ]);
        const [first, second] = [await streamed(a), await streamed(b)];
        expect(first.ids.conversation_id).toBe(second.ids.conversation_id);
        const history = await readHistory(h, channel.key, first.ids.conversation_id);
        expect(history.messages.map((m) => m.turn_index)).toEqual([0, 1, 2, 3]);
      });

      it("is read unchanged by the AI SDK's DefaultChatTransport and readUIMessageStream", async () => {
        const channel = await widgetChannel(h);
        const transport = new DefaultChatTransport<UIMessage>({ api: h.url(CHAT_PATH), headers: { Authorization: `Bearer ${channel.key}` } });
        const chunks = await transport.sendMessages({
          chatId: `sdk-${crypto.randomUUID()}`,
          trigger: "submit-message",
          messageId: undefined,
          messages: [{ id: "m1", role: "user", parts: [{ type: "text", text: "from the SDK" }] }],
          abortSignal: undefined,
        });
        let message: UIMessage | undefined;
        for await (const snapshot of readUIMessageStream<UIMessage>({ stream: chunks, terminateOnError: true })) message = snapshot;
        const texts = (message?.parts ?? []).flatMap((part) => (part.type === "text" ? [part.text] : []));
        expect(texts).toEqual(["Echo: from the SDK"]);
        expect(message?.parts.find((part) => part.type === "data-run")).toMatchObject({ data: { conversation_id: expect.stringMatching(UUID) } });
      });

      it("pauses, state and errors behave as on execute", async () => {
        const ask = await widgetChannel(h, { flow: "ask" });
        const asked = await streamed(await postChat(h, { key: ask.key }, { payload: "hi" }));
        expect(asked.text).toBe("What is your name?");
        const answered = await streamed(await postChat(h, { key: ask.key }, { payload: "Ada", conversation_id: asked.ids.conversation_id }));
        expect(answered.text).toBe("Nice to meet you, Ada!");
        const failing = await widgetChannel(h, { flow: "fail" });
        const { events } = await readSse(await postChat(h, { key: failing.key }, { payload: "go" }));
        expect(events.at(-1)).toMatchObject({ type: "error", errorText: expect.stringContaining("flow failed on purpose") });
      });

      it("422 for an empty or missing text, a bad conversation_id or malformed JSON; 415 for a body that is not JSON; 404/403 for foreign conversations", async () => {
        const channel = await widgetChannel(h);
        for (const body of [
          { payload: "" },
          { payload: "x".repeat(10_001) },
          { payload: "hi", conversation_id: "nope" },
          {},
          { id: "c", messages: [] },
          { id: "c", messages: [{ id: "a", role: "assistant", parts: [{ type: "text", text: "no user" }] }] },
          { id: "c", messages: [{ id: "u", role: "user", parts: [{ type: "file", url: "x" }] }] },
          { id: "", messages: [{ id: "u", role: "user", parts: [{ type: "text", text: "hi" }] }] },
          "{not json",
        ]) {
          await expectError(await postChat(h, { key: channel.key }, body), 422, "validation_error");
        }
        await expectError(await postChat(h, { key: channel.key, contentType: "text/plain" }, "hi"), 415, "unsupported_media_type");
        await expectError(await postChat(h, { key: channel.key }, { payload: "hi", conversation_id: crypto.randomUUID() }), 404, "conversation_not_found");
        await expectError(
          await postChat(h, { key: channel.key }, { payload: "hi", conversation_id: "11111111-1111-1111-1111-111111111111" }),
          404,
          "conversation_not_found",
        );
        const sibling = await widgetChannel(h, { tenantId: channel.tenantId });
        const theirs = await streamed(await postChat(h, { key: sibling.key }, { payload: "mine" }));
        await expectError(
          await postChat(h, { key: channel.key }, { payload: "hi", conversation_id: theirs.ids.conversation_id }),
          403,
          "conversation_forbidden",
        );
      });
    });
  });
}
