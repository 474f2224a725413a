/**
 * The client's long-lived routes against a real service on 127.0.0.1: resumable streams
 * (resume, cancel, and the widget's), and the live-chat subscription and cancel with an agent
 * answering through the built-in inbox.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChannelkitError, createClient, type LiveChatEvent, type UIMessageChunk } from "./index.js";
import { startServer, type TestServer } from "./test-server.js";

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server?.close();
});

const FIFTY_WORDS = Array.from({ length: 50 }, (_, i) => (i === 49 ? `word${i + 1}` : `word${i + 1} `)).join("");

/** The next item of an async iterator, failing after `ms`. */
async function next<T>(iterator: AsyncIterator<T>, ms = 5000): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`nothing within ${ms} ms`)), ms);
  });
  try {
    const step = await Promise.race([iterator.next(), timeout]);
    if (step.done) throw new Error("the iterator ended");
    return step.value;
  } finally {
    clearTimeout(timer);
  }
}

/** Reads a stream's chunks until `count` text deltas have come. */
async function readDeltas(iterator: AsyncIterator<UIMessageChunk>, count: number): Promise<string[]> {
  const deltas: string[] = [];
  while (deltas.length < count) {
    const chunk = await next(iterator);
    if (chunk.type === "text-delta") deltas.push(chunk.delta);
  }
  return deltas;
}

describe("resumable streams", () => {
  it("resume() answers the run in flight whole, from data-run, after its first client left; null (204) once it ended", async () => {
    const channel = await server.channel({ flow: "slow", resumableStreams: true });
    const client = createClient({ baseUrl: server.url, apiKey: channel.key });
    const first = await client.stream({ payload: "Tell me a story" });
    const iterator = first[Symbol.asyncIterator]();
    expect((await next(iterator)).type).toBe("data-run");
    expect(await readDeltas(iterator, 2)).toEqual(["word1 ", "word2 "]);
    // The first client goes away; on this channel the run goes on.
    await first.cancel();

    const resumed = await client.resume(first.conversationId as string);
    expect(resumed).not.toBeNull();
    expect(resumed?.run).toEqual(first.run);
    expect(resumed?.response.headers.get("x-vercel-ai-ui-message-stream")).toBe("v1");
    expect(await resumed?.text()).toBe(FIFTY_WORDS);
    expect(await client.resume(first.conversationId as string)).toBeNull();
    const run = await server.target.storage.findRun(first.runId as string);
    expect(run?.status).toBe("success");
  });

  it("cancel() stops the run in flight from another client: its stream ends with finish, it is stored cancelled; then null (204)", async () => {
    const channel = await server.channel({ flow: "slow", resumableStreams: true });
    const client = createClient({ baseUrl: server.url, apiKey: channel.key });
    const reply = await client.stream({ payload: "Another one" });
    const chunks: UIMessageChunk[] = [];
    const iterator = reply[Symbol.asyncIterator]();
    chunks.push(await next(iterator), await next(iterator), await next(iterator));
    const other = createClient({ baseUrl: server.url, apiKey: channel.key });
    const cancelled = await other.cancel(reply.conversationId as string);
    expect(cancelled).toEqual({ run_id: reply.runId, conversation_id: reply.conversationId, status: "cancelled" });
    for (let step = await iterator.next(); !step.done; step = await iterator.next()) chunks.push(step.value);
    expect(chunks.slice(-2).map((chunk) => chunk.type)).toEqual(["text-end", "finish"]);
    const partial = chunks.map((chunk) => (chunk.type === "text-delta" ? chunk.delta : "")).join("");
    expect(FIFTY_WORDS.startsWith(partial)).toBe(true);
    expect(partial.length).toBeLessThan(FIFTY_WORDS.length);
    expect(await other.cancel(reply.conversationId as string)).toBeNull();
    expect(await other.resume(reply.conversationId as string)).toBeNull();
    const history = await other.history(reply.conversationId as string);
    expect(history.messages.at(-1)?.content).toBe(partial);
  });

  it("resume and cancel of an unknown conversation are conversation_not_found, with history's detail", async () => {
    const channel = await server.channel({ flow: "slow", resumableStreams: true });
    const client = createClient({ baseUrl: server.url, apiKey: channel.key });
    const unknown = crypto.randomUUID();
    for (const call of [client.resume(unknown), client.cancel(unknown)]) {
      const error = await call.catch((reason: unknown) => reason);
      expect(error).toBeInstanceOf(ChannelkitError);
      expect(error).toMatchObject({ status: 404, code: "conversation_not_found", detail: `No conversation found for session id ${unknown}` });
    }
  });

  it("widget.resume() and widget.cancel() by the AI SDK's chat id; null for a chat with no conversation", async () => {
    const channel = await server.channel({ flow: "slow", mode: "public", resumableStreams: true });
    const client = createClient({ baseUrl: server.url, apiKey: channel.key });
    const chatId = `chat-${crypto.randomUUID()}`;
    expect(await client.widget.resume(chatId)).toBeNull();
    expect(await client.widget.cancel(chatId)).toBeNull();
    const reply = await client.widget.chat({ id: chatId, messages: [{ role: "user", parts: [{ type: "text", text: "Go on" }] }], trigger: "submit-message" });
    const iterator = reply[Symbol.asyncIterator]();
    await readDeltas(iterator, 1);
    await reply.cancel();
    const resumed = await client.widget.resume(chatId);
    expect(resumed?.run).toEqual(reply.run);
    const resumedIterator = resumed?.[Symbol.asyncIterator]() as AsyncIterator<UIMessageChunk>;
    expect(await readDeltas(resumedIterator, 2)).toEqual(["word1 ", "word2 "]);
    expect(await client.widget.cancel(chatId)).toEqual({ run_id: reply.runId, conversation_id: reply.conversationId, status: "cancelled" });
    const rest: string[] = [];
    for (let step = await resumedIterator.next(); !step.done; step = await resumedIterator.next()) rest.push(step.value.type);
    expect(rest.at(-1)).toBe("finish");
  });
});

describe("live chat", () => {
  /** An agent's action through the inbox routes, as an agent console sends it. */
  async function agent(tenantId: string, conversationId: string, action: "accept" | "messages" | "close", body?: unknown): Promise<void> {
    const response = await fetch(`${server.url}/api/v1/livechat/conversations/${conversationId}/${action}`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${await server.adminToken(tenantId, "agent-ann")}`,
        "x-tenant-id": tenantId,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    expect(response.status, await response.clone().text()).toBe(200);
  }

  it("subscribe() follows the handover: the mode, the agent joining, the agent's and the user's messages; livechat.cancel() ends it", async () => {
    const channel = await server.channel({ flow: "handover" });
    const client = createClient({ baseUrl: server.url, apiKey: channel.key });
    const run = await client.execute({ payload: "I want a human" });
    expect(run.status).toBe("pending");
    expect(run.output?.metadata.livechat_mode).toBe("livechat_waiting");
    const conversationId = run.conversation_id;

    const subscription = await client.livechat.subscribe(conversationId);
    const events = subscription[Symbol.asyncIterator]();
    try {
      expect(await next(events)).toEqual({ type: "mode", mode: "livechat_waiting", livechat_status_message: null, livechat_conversation_id: null });
      await agent(channel.tenantId, conversationId, "accept");
      const active = await next(events);
      expect(active).toMatchObject({ type: "mode", mode: "livechat_active" });
      await agent(channel.tenantId, conversationId, "messages", { content: "Hi, I am Ann." });
      const fromAgent = await next(events);
      expect(fromAgent).toMatchObject({ type: "message", message: { origin: "livechat", role: "assistant", content: "Hi, I am Ann.", sender: "agent" } });
      expect(subscription.lastEventId).toBe((fromAgent as Extract<LiveChatEvent, { type: "message" }>).message.turn_index);
      // The user's message goes to the agent, not to the flow.
      const toAgent = await client.execute({ payload: "My parcel is late", conversation_id: conversationId });
      expect(toAgent).toMatchObject({ status: "pending", output: { messages: [], metadata: { livechat_mode: "livechat_active" } } });
      expect(await next(events)).toMatchObject({
        type: "message",
        message: { origin: "livechat", role: "user", content: "My parcel is late", sender: "user" },
      });

      // A second subscription replays from a turn.
      const replay = await client.livechat.subscribe(conversationId, { after: -1 });
      const replayed = replay[Symbol.asyncIterator]();
      expect(await next(replayed)).toMatchObject({ type: "mode", mode: "livechat_active" });
      expect(await next(replayed)).toMatchObject({ type: "message", message: { content: "Hi, I am Ann." } });
      expect(await next(replayed)).toMatchObject({ type: "message", message: { content: "My parcel is late" } });
      expect(replay.lastEventId).toBe(subscription.lastEventId);
      await replay.close();
      expect((await replayed.next()).done).toBe(true);

      const cancelled = await client.livechat.cancel(conversationId);
      expect(cancelled).toMatchObject({ conversation_id: conversationId, mode: "livechat_cancelled" });
      expect(cancelled.livechat_conversation_id).toBeTruthy();
      expect(await next(events)).toMatchObject({ type: "mode", mode: "livechat_cancelled" });
      const again = await client.livechat.cancel(conversationId).catch((reason: unknown) => reason);
      expect(again).toMatchObject({ status: 409, code: "livechat_conflict" });
      expect((await client.history(conversationId)).mode).toBe("livechat_cancelled");
    } finally {
      await subscription.close();
    }
    // Closed: the loop ends.
    expect((await events.next()).done).toBe(true);
  });

  it("an AbortSignal ends a subscription; an unknown conversation is conversation_not_found", async () => {
    const channel = await server.channel({ flow: "handover" });
    const client = createClient({ baseUrl: server.url, apiKey: channel.key });
    const run = await client.execute({ payload: "human please" });
    const controller = new AbortController();
    const subscription = await client.livechat.subscribe(run.conversation_id, { signal: controller.signal });
    const seen: LiveChatEvent[] = [];
    const reading = (async () => {
      for await (const event of subscription) {
        seen.push(event);
        controller.abort();
      }
    })();
    await expect(reading).rejects.toMatchObject({ name: "AbortError" });
    expect(seen).toEqual([{ type: "mode", mode: "livechat_waiting", livechat_status_message: null, livechat_conversation_id: null }]);
    const unknown = crypto.randomUUID();
    await expect(client.livechat.subscribe(unknown)).rejects.toMatchObject({ status: 404, code: "conversation_not_found" });
  });
});
