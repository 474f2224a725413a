import { describe, expect, it } from "vitest";
import { EXECUTE_PATH, expectError, readHistory, storedRun, UUID, waitFor } from "./client.js";
import { fetch } from "./conformance.js";
import type { Harness, TestChannel } from "./harness.js";
import { SseFrames } from "./frames.js";
import { webhookPath } from "./webhook.js";

/** A request's `Idempotency-Key`, new for each test. */
const newKey = () => `key-${crypto.randomUUID()}`;

/** `POST` execute with the channel's key and, unless `undefined`, an `Idempotency-Key`; a string body is sent as is. */
function post(h: Harness, apiKey: string, body: unknown, idempotencyKey?: string, signal?: AbortSignal): Promise<Response> {
  const headers = new Headers({ authorization: `Bearer ${apiKey}`, "content-type": "application/json" });
  if (idempotencyKey !== undefined) headers.set("idempotency-key", idempotencyKey);
  const init: RequestInit = { method: "POST", headers, body: typeof body === "string" ? body : JSON.stringify(body) };
  if (signal) init.signal = signal;
  return fetch(h.url(EXECUTE_PATH), init);
}

/** `POST` a webhook channel's `newMessage`, with an `Idempotency-Key` unless `undefined`. */
function newMessage(h: Harness, clientId: string, body: unknown, idempotencyKey?: string): Promise<Response> {
  const headers = new Headers({ "content-type": "application/json" });
  if (idempotencyKey !== undefined) headers.set("idempotency-key", idempotencyKey);
  return fetch(h.url(webhookPath(clientId, "newMessage")), { method: "POST", headers, body: JSON.stringify(body) });
}

/** A 200 answer: its text, its content type, and whether it is a replay. */
async function answered(response: Response): Promise<{ text: string; type: string | null; replayed: string | null }> {
  const text = await response.text();
  expect(response.status, text).toBe(200);
  return { text, type: response.headers.get("content-type"), replayed: response.headers.get("idempotent-replayed") };
}

/** The user messages of a conversation, in order. */
async function userMessages(h: Harness, channel: TestChannel, conversationId: string): Promise<string[]> {
  return (await readHistory(h, channel.key, conversationId)).messages.filter((m) => m.role === "user").map((m) => m.content);
}

/** Sends until the answer is not `409 idempotency_key_in_use` (the first request still finishing), as a client retrying would. */
async function untilFree(send: () => Promise<Response>): Promise<Response> {
  return waitFor(async () => {
    const response = await send();
    if (response.status !== 409) return response;
    await response.body?.cancel();
    return null;
  }, 15_000);
}

/**
 * docs/api.md, "Idempotent requests": an `Idempotency-Key` on execute and on the webhook's
 * `newMessage` answers a retry with the first answer, without running the flow again.
 */
export function idempotencyTests(h: Harness): void {
  describe.concurrent("idempotent requests (Idempotency-Key)", () => {
    it("a JSON execute sent again with its key answers the first answer byte for byte, with Idempotent-Replayed, and runs nothing", async () => {
      const channel = await h.channel({ flow: "echo" });
      const key = newKey();
      const body = { payload: "Pay once", stream: false };
      const first = await answered(await post(h, channel.key, body, key));
      expect(first.replayed).toBeNull();
      const document = JSON.parse(first.text) as { run_id: string; conversation_id: string; status: string };
      expect(document).toMatchObject({ run_id: expect.stringMatching(UUID), status: "success" });

      const again = await answered(await post(h, channel.key, body, key));
      expect(again).toEqual({ text: first.text, type: first.type, replayed: "true" });
      // The same JSON, spaced otherwise, is the same body.
      const spaced = await answered(await post(h, channel.key, '{ "payload" : "Pay once",\n  "stream": false }', key));
      expect(spaced.text).toBe(first.text);
      expect(await userMessages(h, channel, document.conversation_id)).toEqual(["Pay once"]);

      // Without the key, the same body runs again, as always.
      const plain = JSON.parse((await answered(await post(h, channel.key, { ...body, conversation_id: document.conversation_id }))).text);
      const plainAgain = JSON.parse((await answered(await post(h, channel.key, { ...body, conversation_id: document.conversation_id }))).text);
      expect(plainAgain.run_id).not.toBe(plain.run_id);
      expect(await userMessages(h, channel, document.conversation_id)).toEqual(["Pay once", "Pay once", "Pay once"]);
    });

    it("the same key with another body is 422 idempotency_key_reused, and runs nothing", async () => {
      const channel = await h.channel({ flow: "echo" });
      const key = newKey();
      const first = JSON.parse((await answered(await post(h, channel.key, { payload: "first", stream: false }, key))).text);
      await expectError(await post(h, channel.key, { payload: "second", stream: false }, key), 422, "idempotency_key_reused");
      await expectError(await post(h, channel.key, { payload: "first", stream: true }, key), 422, "idempotency_key_reused");
      await expectError(
        await post(h, channel.key, { payload: "first", stream: false, conversation_id: first.conversation_id }, key),
        422,
        "idempotency_key_reused",
      );
      expect(await userMessages(h, channel, first.conversation_id)).toEqual(["first"]);
    });

    it("a stream sent again with its key replays the stored events, byte for byte, and runs nothing", async () => {
      const channel = await h.channel({ flow: "echo" });
      const key = newKey();
      const body = { payload: "Stream once, please", stream: true };
      const response = await post(h, channel.key, body, key);
      expect(response.status).toBe(200);
      const frames = new SseFrames(response);
      await frames.rest();
      expect(frames.events.map((event) => event.type)).toEqual([
        "data-run",
        "text-start",
        "text-delta",
        "text-delta",
        "text-delta",
        "text-delta",
        "text-end",
        "finish",
      ]);

      const replay = await post(h, channel.key, body, key);
      expect(replay.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
      expect(replay.headers.get("x-vercel-ai-ui-message-stream")).toBe("v1");
      expect(replay.headers.get("idempotent-replayed")).toBe("true");
      const replayed = new SseFrames(replay);
      await replayed.rest();
      expect(replayed.raw).toBe(frames.raw);
      const ids = frames.events[0]?.type === "data-run" ? frames.events[0].data : null;
      expect(await userMessages(h, channel, ids?.conversation_id as string)).toEqual([body.payload]);
    });

    it("while the first request runs, the same key is 409 idempotency_key_in_use with Retry-After (another body still 422); then the first answer", async () => {
      const channel = await h.channel({ flow: "slow" });
      const key = newKey();
      const body = { payload: "A long answer", stream: true };
      const first = new SseFrames(await post(h, channel.key, body, key));
      // Its key was claimed before its run began.
      const opened = await first.next();
      expect(opened?.type).toBe("data-run");
      const inUse = await post(h, channel.key, body, key);
      expect(inUse.headers.get("retry-after")).toBe("1");
      await expectError(inUse, 409, "idempotency_key_in_use");
      await expectError(await post(h, channel.key, { payload: "Another", stream: true }, key), 422, "idempotency_key_reused");

      await first.rest();
      expect(first.events.at(-1)?.type).toBe("finish");
      const again = new SseFrames(await post(h, channel.key, body, key));
      await again.rest();
      expect(again.raw).toBe(first.raw);
      const conversationId = opened?.type === "data-run" ? opened.data.conversation_id : "";
      expect(await userMessages(h, channel, conversationId)).toEqual([body.payload]);
    }, 20_000);

    it("a key is scoped to its channel: the same key and body on another channel run there", async () => {
      const [a, b] = await Promise.all([h.channel({ flow: "echo" }), h.channel({ flow: "echo" })]);
      const key = newKey();
      const body = { payload: "Same key, two channels", stream: false };
      const onA = JSON.parse((await answered(await post(h, a.key, body, key))).text);
      const onB = await answered(await post(h, b.key, body, key));
      expect(onB.replayed).toBeNull();
      expect(JSON.parse(onB.text).conversation_id).not.toBe(onA.conversation_id);
    });

    it("a flow that fails is an answer like any other: replayed", async () => {
      const channel = await h.channel({ flow: "fail" });
      const key = newKey();
      const first = await answered(await post(h, channel.key, { payload: "x", stream: false }, key));
      expect(JSON.parse(first.text)).toMatchObject({ status: "error", error: { code: "flow_error" } });
      const again = await answered(await post(h, channel.key, { payload: "x", stream: false }, key));
      expect(again).toEqual({ ...first, replayed: "true" });
    });

    it("a malformed Idempotency-Key is 400 invalid_idempotency_key, checked before the body; 255 visible ASCII characters are fine", async () => {
      const channel = await h.channel({ flow: "echo" });
      for (const bad of ["", "a".repeat(256), "two words", "clé", "a,\tb"]) {
        await expectError(await post(h, channel.key, { payload: "x", stream: false }, bad), 400, "invalid_idempotency_key");
        await expectError(await post(h, channel.key, "{not json", bad), 400, "invalid_idempotency_key");
      }
      const punctuation = "!#$%&'*+-.^_`|0123456789:;<=>?@[]{}/";
      const longest = `${"~".repeat(255 - punctuation.length)}${punctuation}`;
      expect(longest).toHaveLength(255);
      expect((await answered(await post(h, channel.key, { payload: "x", stream: false }, longest))).replayed).toBeNull();
      // The key's other checks come first: no key, no channel.
      await expectError(await post(h, "svc_live_unknown", { payload: "x" }, ""), 401, "invalid_api_key");
    });

    it("a refused request keeps no key: after a 422 validation_error or a 404, the same key runs the corrected request", async () => {
      const channel = await h.channel({ flow: "echo" });
      const key = newKey();
      await expectError(await post(h, channel.key, { payload: "", stream: false }, key), 422, "validation_error");
      await expectError(await post(h, channel.key, { payload: "x", stream: false, conversation_id: crypto.randomUUID() }, key), 404, "conversation_not_found");
      const ran = await answered(await post(h, channel.key, { payload: "corrected", stream: false }, key));
      expect(ran.replayed).toBeNull();
    });

    it("a stream whose client left (its run stopped, stored cancelled) keeps no answer: the same key runs again", async () => {
      const channel = await h.channel({ flow: "slow" });
      const key = newKey();
      const body = { payload: "Leave me", stream: true };
      const controller = new AbortController();
      const response = await post(h, channel.key, body, key, controller.signal);
      const frames = new SseFrames(response);
      await frames.deltas(1);
      controller.abort();
      const first = frames.events[0]?.type === "data-run" ? frames.events[0].data : null;
      expect(await storedRun(h.target.storage, first?.run_id as string)).toMatchObject({ status: "cancelled" });

      const retried = new AbortController();
      const again = await untilFree(() => post(h, channel.key, body, key, retried.signal));
      expect(again.status).toBe(200);
      expect(again.headers.get("idempotent-replayed")).toBeNull();
      const second = new SseFrames(again);
      const event = await second.next();
      expect(event?.type).toBe("data-run");
      expect(event?.type === "data-run" && event.data.run_id).not.toBe(first?.run_id);
      retried.abort();
    });

    it("on a channel with resumable streams, a JSON run whose client left goes on and keeps its answer: the retry gets it", async () => {
      const channel = await h.channel({ flow: "slow", resumableStreams: true });
      // A conversation, its first run stopped through the cancel route.
      const opening = new SseFrames(await post(h, channel.key, { payload: "opening", stream: true }));
      const opened = await opening.next();
      const conversationId = opened?.type === "data-run" ? opened.data.conversation_id : "";
      const cancelled = await fetch(h.url(`/public/v1/api/conversations/${conversationId}/cancel`), {
        method: "POST",
        headers: { authorization: `Bearer ${channel.key}` },
      });
      expect(cancelled.status).toBe(200);
      await cancelled.body?.cancel();
      await opening.rest();

      const key = newKey();
      const body = { payload: "Go on without me", stream: false, conversation_id: conversationId };
      const controller = new AbortController();
      const first = post(h, channel.key, body, key, controller.signal);
      first.catch(() => undefined);
      // Its run has its turn (its message is in history), so its key is claimed: its client leaves.
      await waitFor(async () => ((await userMessages(h, channel, conversationId)).includes(body.payload) ? true : null));
      controller.abort();
      await expectError(await post(h, channel.key, body, key), 409, "idempotency_key_in_use");
      const again = await answered(await untilFree(() => post(h, channel.key, body, key)));
      expect(again.replayed).toBe("true");
      const document = JSON.parse(again.text);
      expect(document).toMatchObject({ status: "success", conversation_id: conversationId, output: { messages: [{ role: "assistant" }] } });
      expect(await userMessages(h, channel, conversationId)).toEqual(["opening", body.payload]);
    }, 20_000);

    it("on a channel with resumable streams, a recorded stream is replayed as it was sent", async () => {
      const channel = await h.channel({ flow: "echo", resumableStreams: true });
      const key = newKey();
      const body = { payload: "Recorded once", stream: true };
      const frames = new SseFrames(await post(h, channel.key, body, key));
      await frames.rest();
      const replayed = new SseFrames(await post(h, channel.key, body, key));
      await replayed.rest();
      expect(replayed.raw).toBe(frames.raw);
      expect(frames.events.at(-1)?.type).toBe("finish");
    });

    it("the webhook's newMessage sent again with its key answers the first answer and runs nothing; another body is 422", async () => {
      const channel = await h.channel({ flow: "echo", type: "webhook", languages: ["en_US"] });
      const clientId = (channel.view as { client_id?: string }).client_id as string;
      const started = await fetch(h.url(webhookPath(clientId, "startConversation")), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ language: "en_US", integrationContext: {} }),
      });
      const conversationId = ((await started.json()) as { conversation: { conversation: { id: string } } }).conversation.conversation.id;
      const key = newKey();
      const body = { conversationId, userInput: "Only once" };
      const first = await answered(await newMessage(h, clientId, body, key));
      expect(JSON.parse(first.text).conversation.newEvents[0].data.rawContent).toBe("Echo: Only once");
      const again = await answered(await newMessage(h, clientId, body, key));
      expect(again).toEqual({ ...first, replayed: "true" });
      await expectError(await newMessage(h, clientId, { conversationId, userInput: "Something else" }, key), 422, "idempotency_key_reused");
      await expectError(await newMessage(h, clientId, body, "bad key"), 400, "invalid_idempotency_key");
      const messages = await h.target.storage.listRecentMessages(conversationId, 50);
      expect(messages.filter((m) => m.role === "user").map((m) => m.content)).toEqual(["Only once"]);
    });
  });
}
