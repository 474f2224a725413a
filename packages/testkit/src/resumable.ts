import type { UIStreamEvent } from "@channelkit/core";
import { describe, expect, it } from "vitest";
import { adminFetch, adminOk, channelAdminPath, tokenFor } from "./admin-client.js";
import { execute, expectError, expectNoConversation, readHistory, runJson, storedRun, unknownKey } from "./client.js";
import type { Harness, TestChannel } from "./harness.js";
import { SseFrames } from "./frames.js";
import { readSse, readWithAiSdk, streamedText } from "./sse.js";
import { fetch } from "./conformance.js";

/** What the `slow` flow says, one `text-delta` per word, 100 ms apart. */
const WORDS = Array.from({ length: 50 }, (_, i) => (i === 49 ? `word${i + 1}` : `word${i + 1} `));
const FIFTY_WORDS = WORDS.join("");
const APP = "https://resume.example";

const streamPath = (conversationId: string) => `/public/v1/api/conversations/${encodeURIComponent(conversationId)}/stream`;
const cancelPath = (conversationId: string) => `/public/v1/api/conversations/${encodeURIComponent(conversationId)}/cancel`;
const chatStreamPath = (chatId: string) => `/public/widget/chat/${encodeURIComponent(chatId)}/stream`;
const chatCancelPath = (chatId: string) => `/public/widget/chat/${encodeURIComponent(chatId)}/cancel`;

interface Call {
  key?: string | null;
  origin?: string;
  signal?: AbortSignal;
}

function headersOf({ key, origin }: Call): Headers {
  const headers = new Headers();
  if (key) headers.set("authorization", `Bearer ${key}`);
  if (origin) headers.set("origin", origin);
  return headers;
}

/** `GET` a resume route (`/public/v1/api/conversations/{id}/stream` or the widget's). */
function getStream(h: Harness, path: string, call: Call): Promise<Response> {
  return fetch(h.url(path), { headers: headersOf(call), ...(call.signal ? { signal: call.signal } : {}) });
}

/** `POST` a cancel route, with no body. */
function postCancel(h: Harness, path: string, call: Call): Promise<Response> {
  return fetch(h.url(path), { method: "POST", headers: headersOf(call) });
}

/** `POST /public/widget/chat` with the AI SDK chat request `DefaultChatTransport` sends. */
function postChat(h: Harness, chatId: string, text: string, call: Call): Promise<Response> {
  const headers = headersOf(call);
  headers.set("content-type", "application/json");
  return fetch(h.url("/public/widget/chat"), {
    method: "POST",
    headers,
    body: JSON.stringify({ id: chatId, messages: [{ id: crypto.randomUUID(), role: "user", parts: [{ type: "text", text }] }], trigger: "submit-message" }),
    ...(call.signal ? { signal: call.signal } : {}),
  });
}

/** The ids of a `data-run` event. */
function runOf(event: UIStreamEvent | undefined): { run_id: string; conversation_id: string } {
  if (event?.type !== "data-run") throw new Error(`The first event is ${JSON.stringify(event)}, not data-run`);
  return event.data;
}

/** A `slow` run streamed by a client that reads its first `deltas` text deltas and can go away. */
interface Streaming {
  runId: string;
  conversationId: string;
  frames: SseFrames;
  /** Closes the connection, as a tab that closes. */
  leave(): void;
}

/** Starts a streamed `slow` run with `send` and reads `deltas` text deltas of it. */
async function streamSlow(send: (signal: AbortSignal) => Promise<Response>, deltas: number): Promise<Streaming> {
  const controller = new AbortController();
  const response = await send(controller.signal);
  const text = response.status === 200 ? "" : await response.text();
  expect(response.status, text).toBe(200);
  expect(response.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
  const frames = new SseFrames(response);
  const ids = runOf((await frames.next()) ?? undefined);
  await frames.deltas(deltas);
  return { runId: ids.run_id, conversationId: ids.conversation_id, frames, leave: () => controller.abort() };
}

/** Asserts the headers of a resumed stream: those of the streamed execute. */
function expectStreamHeaders(response: Response): void {
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
  expect(response.headers.get("cache-control")).toBe("no-cache, no-transform");
  expect(response.headers.get("x-accel-buffering")).toBe("no");
  expect(response.headers.get("x-vercel-ai-ui-message-stream")).toBe("v1");
}

/** Asserts a 204 with no body. */
async function expectNothing(response: Response, where: string): Promise<void> {
  const body = await response.text();
  expect({ where, status: response.status, body }).toEqual({ where, status: 204, body: "" });
}

/**
 * Asserts `events` are a whole `slow` stream: data-run of `runId`, text-start, every word
 * once and in order, text-end, finish, one text id.
 */
function expectWholeSlowStream(events: UIStreamEvent[], runId: string, conversationId: string): void {
  expect(runOf(events[0])).toEqual({ run_id: runId, conversation_id: conversationId });
  expect(events.map((event) => event.type)).toEqual(["data-run", "text-start", ...WORDS.map(() => "text-delta"), "text-end", "finish"]);
  expect(events.flatMap((event) => (event.type === "text-delta" ? [event.delta] : []))).toEqual(WORDS);
  expect(events.at(-1)).toEqual({ type: "finish", finishReason: "stop", messageMetadata: { status: "success", livechat_mode: null } });
  expect(new Set(events.flatMap((event) => ("id" in event ? [event.id] : []))).size).toBe(1);
}

/** Asserts a cancel answered 200 `{ run_id, conversation_id, status: "cancelled" }`. */
async function expectCancelled(response: Response, runId: string, conversationId: string): Promise<void> {
  const text = await response.text();
  expect(response.status, text).toBe(200);
  expect(response.headers.get("content-type")).toMatch(/^application\/json\b/);
  expect(JSON.parse(text)).toEqual({ run_id: runId, conversation_id: conversationId, status: "cancelled" });
}

/**
 * Asserts the history of a conversation whose one run was stopped: its user message, then
 * the partial reply, which holds at least `seen` (what a client read) and is not the whole.
 */
async function expectPartialHistory(h: Harness, key: string, conversationId: string, runId: string, payload: string, seen: string): Promise<void> {
  const { messages } = await readHistory(h, key, conversationId);
  expect(messages.map((message) => [message.turn_index, message.role, message.run_id])).toEqual([
    [0, "user", runId],
    [1, "assistant", runId],
  ]);
  expect(messages[0]?.content).toBe(payload);
  const partial = messages[1]?.content ?? "";
  expect(partial.startsWith(seen.trimEnd()), `${JSON.stringify(partial)} starts with ${JSON.stringify(seen)}`).toBe(true);
  expect(FIFTY_WORDS.startsWith(partial)).toBe(true);
  expect(partial.length).toBeLessThan(FIFTY_WORDS.length);
}

/** A public `slow` channel with resumable streams, for the widget. */
function widgetChannel(h: Harness): Promise<TestChannel> {
  return h.channel({ flow: "slow", mode: "public", allowedOrigins: [APP], resumableStreams: true });
}

/**
 * Resumable streams (our extension, opt-in per channel; decisions.md): a streamed run of a
 * channel with `resumable_streams` goes on when its client leaves, and
 * `GET .../stream` answers its whole stream; `POST .../cancel` stops it. The cases run side
 * by side: each streams the 5-second `slow` flow, most of them stop it with a cancel.
 */
export function resumableTests(h: Harness): void {
  describe.concurrent("resumable streams", () => {
    it("the admin PATCH sets resumable_streams (shown by PATCH and GET, false by default) and it takes effect on the next request; a non-boolean is 422 validation_error", async () => {
      const channel = await h.channel({ flow: "slow" });
      expect(channel.view).toMatchObject({ resumable_streams: false });
      const token = await tokenFor(h, channel.tenantId);
      const patch = (body: unknown) => adminFetch(h, "PATCH", channelAdminPath(channel.id), { token, tenant: channel.tenantId, body });

      const set = await adminOk(h, "PATCH", channelAdminPath(channel.id), { token, tenant: channel.tenantId, body: { resumable_streams: true } });
      expect(set.channel.resumable_streams).toBe(true);
      expect(set.signing_secret).toBeUndefined();
      const shown = await adminOk(h, "GET", channelAdminPath(channel.id), { token, tenant: channel.tenantId });
      expect(shown.channel.resumable_streams).toBe(true);
      for (const bad of ["yes", 1, null, {}, "true"]) await expectError(await patch({ resumable_streams: bad }), 422, "validation_error");
      expect((await adminOk(h, "GET", channelAdminPath(channel.id), { token, tenant: channel.tenantId })).channel.resumable_streams).toBe(true);

      // Recorded now: a stream in flight can be resumed (then stopped).
      const run = await streamSlow((signal) => execute(h, channel.key, { payload: "patched", stream: true }, { signal }), 1);
      const resumed = await getStream(h, streamPath(run.conversationId), { key: channel.key });
      expectStreamHeaders(resumed);
      const follower = new SseFrames(resumed);
      expect(runOf((await follower.next()) ?? undefined).run_id).toBe(run.runId);
      await expectCancelled(await postCancel(h, cancelPath(run.conversationId), { key: channel.key }), run.runId, run.conversationId);
      await Promise.all([run.frames.rest(), follower.rest()]);

      const unset = await adminOk(h, "PATCH", channelAdminPath(channel.id), { token, tenant: channel.tenantId, body: { resumable_streams: false } });
      expect(unset.channel.resumable_streams).toBe(false);
    });

    it("a stream whose client went away goes on: GET .../stream answers it whole from data-run, every word once and in order, to finish, read alike by the AI SDK's client; stored success, whole in history; then 204", async () => {
      const channel = await h.channel({ flow: "slow", resumableStreams: true });
      const client = await streamSlow((signal) => execute(h, channel.key, { payload: "go on", stream: true }, { signal }), 3);
      client.leave();
      // The run goes on with nobody reading.
      await new Promise((resolve) => setTimeout(resolve, 300));

      const [resumed, bySdk] = await Promise.all([
        getStream(h, streamPath(client.conversationId), { key: channel.key }),
        getStream(h, streamPath(client.conversationId), { key: channel.key }),
      ]);
      expectStreamHeaders(resumed);
      expectStreamHeaders(bySdk);
      const follower = new SseFrames(resumed);
      const [, message] = await Promise.all([follower.rest(), readWithAiSdk(bySdk)]);

      // The same stream from its first event: what the client read, byte for byte, then the rest.
      expect(follower.raw.startsWith(client.frames.raw), `${follower.raw.slice(0, 300)}\n…does not start with\n${client.frames.raw}`).toBe(true);
      expectWholeSlowStream(follower.events, client.runId, client.conversationId);
      expect(follower.raw).not.toContain("[DONE]");

      expect(message.role).toBe("assistant");
      expect(message.parts.filter((part) => part.type === "text")).toEqual([expect.objectContaining({ type: "text", text: FIFTY_WORDS, state: "done" })]);
      const data = message.parts.filter((part) => part.type === "data-run") as { data: { run_id: string } }[];
      expect(data.map((part) => part.data.run_id)).toEqual([client.runId]);

      // Stored once it finished: success, the whole reply in history.
      expect(await storedRun(h.target.storage, client.runId)).toMatchObject({ conversationId: client.conversationId, status: "success", error: null });
      const { messages } = await readHistory(h, channel.key, client.conversationId);
      expect(messages.map((m) => [m.turn_index, m.role, m.content, m.run_id])).toEqual([
        [0, "user", "go on", client.runId],
        [1, "assistant", FIFTY_WORDS, client.runId],
      ]);
      await expectNothing(await getStream(h, streamPath(client.conversationId), { key: channel.key }), "after the end");
      await expectNothing(await postCancel(h, cancelPath(client.conversationId), { key: channel.key }), "cancel after the end");
    });

    it("204 when no run of the conversation is in flight: after a streamed run ended, after a JSON run; cancel likewise 204", async () => {
      const channel = await h.channel({ flow: "echo", resumableStreams: true });
      const streamed = await readSse(await execute(h, channel.key, { payload: "short", stream: true }));
      const conversationId = runOf(streamed.events[0]).conversation_id;
      expect(streamedText(streamed.events)).toBe("Echo: short");
      await expectNothing(await getStream(h, streamPath(conversationId), { key: channel.key }), "after a stream");
      await expectNothing(await postCancel(h, cancelPath(conversationId), { key: channel.key }), "cancel after a stream");
      const json = await runJson(h, channel.key, { payload: "plain" });
      expect(json.status).toBe("success");
      await expectNothing(await getStream(h, streamPath(json.conversation_id), { key: channel.key }), "after a JSON run");
      await expectNothing(await postCancel(h, cancelPath(json.conversation_id), { key: channel.key }), "cancel after a JSON run");
    });

    it("an unknown, another channel's or another tenant's conversation is 404 { detail } as on history, on both routes and on the widget's", async () => {
      const channel = await h.channel({ flow: "echo", resumableStreams: true });
      const sibling = await h.channel({ flow: "echo", resumableStreams: true, tenantId: channel.tenantId });
      const foreign = await h.channel({ flow: "echo", resumableStreams: true });
      const widget = await h.channel({ flow: "echo", mode: "public", allowedOrigins: [APP], resumableStreams: true, tenantId: channel.tenantId });
      const siblingConversation = (await runJson(h, sibling.key, { payload: "sibling" })).conversation_id;
      const foreignConversation = (await runJson(h, foreign.key, { payload: "foreign" })).conversation_id;
      for (const id of [crypto.randomUUID(), siblingConversation, foreignConversation]) {
        await expectNoConversation(await getStream(h, streamPath(id), { key: channel.key }), id);
        await expectNoConversation(await postCancel(h, cancelPath(id), { key: channel.key }), id);
      }
      // The widget takes a chat id too: a conversation id of another channel or tenant is not one of its chats.
      for (const id of [siblingConversation, foreignConversation]) {
        await expectNoConversation(await getStream(h, chatStreamPath(id), { key: widget.key, origin: APP }), id);
        await expectNoConversation(await postCancel(h, chatCancelPath(id), { key: widget.key, origin: APP }), id);
      }
    });

    it("the checks of history: 401 missing_api_key, 401 invalid_api_key, 403 origin_not_allowed for a publishable key, 403 environment_mismatch, 409 channel_inactive, 410 channel_archived, 429 rate_limited", async () => {
      const channel = await h.channel({ flow: "echo", resumableStreams: true });
      const conversationId = (await runJson(h, channel.key, { payload: "checks" })).conversation_id;
      for (const path of [streamPath(conversationId), cancelPath(conversationId)]) {
        const send = path.endsWith("/stream") ? getStream : postCancel;
        await expectError(await send(h, path, { key: null }), 401, "missing_api_key");
        await expectError(await send(h, path, { key: unknownKey() }), 401, "invalid_api_key");
      }
      const page = await h.channel({ flow: "echo", mode: "public", allowedOrigins: [APP], resumableStreams: true });
      const pageConversation = (await runJson(h, page.key, { payload: "page" }, { origin: APP })).conversation_id;
      await expectError(await getStream(h, streamPath(pageConversation), { key: page.key, origin: "https://evil.example" }), 403, "origin_not_allowed");
      const allowed = await getStream(h, streamPath(pageConversation), { key: page.key, origin: APP });
      await expectNothing(allowed, "allowed origin");
      expect(allowed.headers.get("access-control-allow-origin")).toBe(APP);
      await h.update(channel, { environment: "staging" });
      await expectError(await getStream(h, streamPath(conversationId), { key: channel.key }), 403, "environment_mismatch");
      await expectError(await postCancel(h, cancelPath(conversationId), { key: channel.key }), 403, "environment_mismatch");
      await h.update(channel, { environment: "prod", state: "inactive" });
      await expectError(await getStream(h, streamPath(conversationId), { key: channel.key }), 409, "channel_inactive");
      await expectError(await postCancel(h, cancelPath(conversationId), { key: channel.key }), 409, "channel_inactive");
      await h.update(channel, { state: "archived" });
      await expectError(await getStream(h, streamPath(conversationId), { key: channel.key }), 410, "channel_archived");

      // Counted under the channel's key like history: the execute, two resumes, then 429.
      const limited = await h.channel({ flow: "echo", resumableStreams: true, rateLimits: { serverKey: { requests: 3, windowSeconds: 60 } } });
      const limitedConversation = (await runJson(h, limited.key, { payload: "counted" })).conversation_id;
      await expectNothing(await getStream(h, streamPath(limitedConversation), { key: limited.key }), "first resume");
      await expectNothing(await getStream(h, streamPath(limitedConversation), { key: limited.key }), "second resume");
      const refused = await getStream(h, streamPath(limitedConversation), { key: limited.key });
      expect(refused.headers.get("retry-after")).toMatch(/^\d+$/);
      await expectError(refused, 429, "rate_limited");
    });

    it("on a channel without resumable streams nothing is recorded: GET .../stream is 204 while the run streams, and a disconnect still cancels it (stored cancelled)", async () => {
      const channel = await h.channel({ flow: "slow" });
      const client = await streamSlow((signal) => execute(h, channel.key, { payload: "not kept", stream: true }, { signal }), 2);
      await expectNothing(await getStream(h, streamPath(client.conversationId), { key: channel.key }), "while streaming");
      client.leave();
      expect(await storedRun(h.target.storage, client.runId)).toMatchObject({ conversationId: client.conversationId, status: "cancelled" });
      await expectPartialHistory(h, channel.key, client.conversationId, client.runId, "not kept", client.frames.text());
      await expectNothing(await getStream(h, streamPath(client.conversationId), { key: channel.key }), "after the disconnect");
    });

    it("a run answered as JSON on a resumable channel is in flight too: GET .../stream follows it, POST .../cancel stops it, and its JSON answer says cancelled", async () => {
      const channel = await h.channel({ flow: "slow", resumableStreams: true });
      const opening = await streamSlow((signal) => execute(h, channel.key, { payload: "opening", stream: true }, { signal }), 1);
      await expectCancelled(await postCancel(h, cancelPath(opening.conversationId), { key: channel.key }), opening.runId, opening.conversationId);
      await opening.frames.rest();

      const answer = runJson(h, channel.key, { payload: "as json", conversation_id: opening.conversationId });
      let resumed = await getStream(h, streamPath(opening.conversationId), { key: channel.key });
      for (let tries = 0; resumed.status === 204 && tries < 50; tries++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        resumed = await getStream(h, streamPath(opening.conversationId), { key: channel.key });
      }
      expectStreamHeaders(resumed);
      const follower = new SseFrames(resumed);
      const { run_id } = runOf((await follower.next()) ?? undefined);
      expect(run_id).not.toBe(opening.runId);
      await follower.deltas(2);
      await expectCancelled(await postCancel(h, cancelPath(opening.conversationId), { key: channel.key }), run_id, opening.conversationId);
      await follower.rest();
      const document = await answer;
      expect(document).toMatchObject({ run_id, conversation_id: opening.conversationId, status: "cancelled" });
      expect(follower.text().startsWith("word1 word2 ")).toBe(true);
      expect(follower.text()).not.toBe(FIFTY_WORDS);
      await expectNothing(await getStream(h, streamPath(opening.conversationId), { key: channel.key }), "after the JSON run");
    });

    it("POST .../cancel stops the run in flight: 200 { run_id, conversation_id, status: cancelled }; its client and a follower see the same stream end; stored cancelled, the partial reply in history; then 204", async () => {
      const channel = await h.channel({ flow: "slow", resumableStreams: true });
      const client = await streamSlow((signal) => execute(h, channel.key, { payload: "stop me", stream: true }, { signal }), 3);
      const resumed = await getStream(h, streamPath(client.conversationId), { key: channel.key });
      expectStreamHeaders(resumed);
      const follower = new SseFrames(resumed);
      await follower.deltas(3);

      await expectCancelled(await postCancel(h, cancelPath(client.conversationId), { key: channel.key }), client.runId, client.conversationId);
      await Promise.all([client.frames.rest(), follower.rest()]);
      // Both read the one stream, to its last event.
      expect(follower.raw).toBe(client.frames.raw);
      expect(["finish", "error"]).toContain(client.frames.events.at(-1)?.type);
      const text = client.frames.text();
      expect(FIFTY_WORDS.startsWith(text) && text.length < FIFTY_WORDS.length, JSON.stringify(text)).toBe(true);

      expect(await storedRun(h.target.storage, client.runId, 1000)).toMatchObject({ conversationId: client.conversationId, status: "cancelled" });
      await expectPartialHistory(h, channel.key, client.conversationId, client.runId, "stop me", text);
      await expectNothing(await getStream(h, streamPath(client.conversationId), { key: channel.key }), "stream after the cancel");
      await expectNothing(await postCancel(h, cancelPath(client.conversationId), { key: channel.key }), "cancel after the cancel");
    });

    it("widget: GET /public/widget/chat/{chatId}/stream resumes by the AI SDK chat id and by the conversation id (publishable key, allowed Origin); 204 for a chat with no conversation; its cancel route stops the run", async () => {
      const channel = await widgetChannel(h);
      const server = await h.channel({ flow: "slow", resumableStreams: true });
      const chatId = `chat-${crypto.randomUUID()}`;
      const client = await streamSlow((signal) => postChat(h, chatId, "widget words", { key: channel.key, origin: APP, signal }), 2);
      client.leave();

      const byChat = await getStream(h, chatStreamPath(chatId), { key: channel.key, origin: APP });
      expectStreamHeaders(byChat);
      expect(byChat.headers.get("access-control-allow-origin")).toBe(APP);
      const byConversation = await getStream(h, chatStreamPath(client.conversationId), { key: channel.key });
      expectStreamHeaders(byConversation);
      const followers = [new SseFrames(byChat), new SseFrames(byConversation)];
      for (const follower of followers) {
        await follower.deltas(3);
        expect(runOf(follower.events[0])).toEqual({ run_id: client.runId, conversation_id: client.conversationId });
        expect(follower.raw.startsWith(client.frames.raw)).toBe(true);
      }

      await expectError(await getStream(h, chatStreamPath(chatId), { key: server.key }), 403, "public_key_required");
      await expectError(await postCancel(h, chatCancelPath(chatId), { key: server.key }), 403, "public_key_required");
      await expectError(await getStream(h, chatStreamPath(chatId), { key: channel.key, origin: "https://evil.example" }), 403, "origin_not_allowed");
      await expectError(await postCancel(h, chatCancelPath(chatId), { key: channel.key, origin: "https://evil.example" }), 403, "origin_not_allowed");
      await expectError(await getStream(h, chatStreamPath(chatId), { key: null, origin: APP }), 401, "missing_api_key");
      await expectNothing(await getStream(h, chatStreamPath(`chat-${crypto.randomUUID()}`), { key: channel.key, origin: APP }), "a new chat");
      await expectNothing(await postCancel(h, chatCancelPath(`chat-${crypto.randomUUID()}`), { key: channel.key, origin: APP }), "cancel of a new chat");

      await expectCancelled(await postCancel(h, chatCancelPath(chatId), { key: channel.key, origin: APP }), client.runId, client.conversationId);
      await Promise.all(followers.map((follower) => follower.rest()));
      const [first, second] = followers as [SseFrames, SseFrames];
      expect(second.raw).toBe(first.raw);
      expect(["finish", "error"]).toContain(first.events.at(-1)?.type);
      expect(await storedRun(h.target.storage, client.runId, 1000)).toMatchObject({ status: "cancelled" });
      await expectPartialHistory(h, channel.key, client.conversationId, client.runId, "widget words", first.text());
      await expectNothing(await getStream(h, chatStreamPath(chatId), { key: channel.key, origin: APP }), "chat stream after the cancel");
      await expectNothing(await getStream(h, chatStreamPath(client.conversationId), { key: channel.key, origin: APP }), "conversation stream after the cancel");
      await expectNothing(await postCancel(h, chatCancelPath(chatId), { key: channel.key, origin: APP }), "chat cancel after the cancel");
    });
  });
}
