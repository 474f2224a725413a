/**
 * The client's Idempotency-Key against a real service on 127.0.0.1: a call whose answer was
 * lost on the way back is sent again with its key, and the service answers the first answer
 * without running the flow again (execute, stream, the webhook's newMessage); a retry that finds
 * its first attempt still running waits for it (409 idempotency_key_in_use, Retry-After); a key
 * of the caller's own is sent as given.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient, type UIMessageChunk } from "./index.js";
import { newIdempotencyKey } from "./idempotency.js";
import { startServer, type TestServer } from "./test-server.js";

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server?.close();
});

/** What a {@link lossyFetch} saw of each attempt. */
interface Attempt {
  key: string | null;
  /** The answer's status, or null for an attempt cut off before it. */
  status: number | null;
  replayed: string | null;
  /** The answer's body, for an answer that was lost. */
  lost?: string;
}

/**
 * A `fetch` that loses the answers of the first `lose` attempts: the request reaches the
 * service and its answer is read whole (the run ends and is stored), then the client is told
 * the connection was reset, as when a proxy or the network drops a response. With `cutAfterMs`
 * the attempt is instead cut off that long after it was sent, before any answer.
 */
function lossyFetch(lose: number, cutAfterMs?: number): { fetch: typeof fetch; attempts: Attempt[] } {
  const attempts: Attempt[] = [];
  let left = lose;
  const lossy = async (input: RequestInfo | URL, init?: RequestInit) => {
    const attempt: Attempt = { key: new Headers(init?.headers).get("idempotency-key"), status: null, replayed: null };
    attempts.push(attempt);
    if (left > 0 && cutAfterMs !== undefined) {
      left--;
      const controller = new AbortController();
      fetch(input, { ...init, signal: controller.signal }).catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, cutAfterMs));
      controller.abort();
      throw new TypeError("fetch failed: the connection was reset");
    }
    const response = await fetch(input, init);
    attempt.status = response.status;
    attempt.replayed = response.headers.get("idempotent-replayed");
    if (left > 0) {
      left--;
      attempt.lost = await response.text();
      throw new TypeError("fetch failed: the connection was reset");
    }
    return response;
  };
  return { fetch: lossy as typeof fetch, attempts };
}

/** The user messages of a conversation, as the service stored them. */
async function userMessages(conversationId: string): Promise<string[]> {
  const messages = await server.target.storage.listRecentMessages(conversationId, 100);
  return messages.filter((message) => message.role === "user").map((message) => message.content);
}

describe("a call sent again with its Idempotency-Key runs the flow once", () => {
  it("an execute whose answer was lost is sent again with its key: the first answer, replayed; the flow ran once", async () => {
    const channel = await server.channel({ flow: "echo" });
    const { fetch, attempts } = lossyFetch(1);
    const client = createClient({ baseUrl: server.url, apiKey: channel.key, fetch, retry: { baseDelayMs: 10 } });
    const run = await client.execute({ payload: "Charge the card" });
    expect(run).toEqual(JSON.parse(attempts[0]?.lost as string));
    expect(attempts.map(({ status, replayed }) => [status, replayed])).toEqual([
      [200, null],
      [200, "true"],
    ]);
    expect(attempts[0]?.key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(attempts[1]?.key).toBe(attempts[0]?.key);
    expect(await userMessages(run.conversation_id)).toEqual(["Charge the card"]);
    expect(run.output?.result).toEqual({ echo: "Charge the card", turn: 1 });
  });

  it("a stream whose answer was lost before it began is sent again: the stored events, the flow ran once", async () => {
    const channel = await server.channel({ flow: "echo" });
    const { fetch, attempts } = lossyFetch(1);
    const client = createClient({ baseUrl: server.url, apiKey: channel.key, fetch, retry: { baseDelayMs: 10 } });
    const reply = await client.stream({ payload: "Stream it once" });
    const chunks: UIMessageChunk[] = [];
    for await (const chunk of reply) chunks.push(chunk);
    const lost = (attempts[0]?.lost as string)
      .split("\n\n")
      .filter(Boolean)
      .map((frame) => JSON.parse(frame.slice("data: ".length)));
    expect(chunks).toEqual(lost);
    expect(chunks.at(-1)?.type).toBe("finish");
    expect(attempts.map(({ status, replayed }) => [status, replayed])).toEqual([
      [200, null],
      [200, "true"],
    ]);
    expect(await userMessages(reply.conversationId as string)).toEqual(["Stream it once"]);
  });

  it("the webhook's newMessage whose answer was lost is sent again: the first answer, the flow ran once", async () => {
    const channel = await server.channel({ flow: "echo", type: "webhook" });
    const started = await createClient({ baseUrl: server.url })
      .webhook(channel.clientId as string)
      .startConversation({ language: "en_US" });
    const conversationId = started.conversation.conversation.id;
    const { fetch, attempts } = lossyFetch(1);
    const webhook = createClient({ baseUrl: server.url, fetch, retry: { baseDelayMs: 10 } }).webhook(channel.clientId as string);
    const answered = await webhook.newMessage({ conversationId, userInput: "Only once" });
    expect(answered).toEqual(JSON.parse(attempts[0]?.lost as string));
    expect(attempts.map(({ replayed }) => replayed)).toEqual([null, "true"]);
    expect(await userMessages(conversationId)).toEqual(["Only once"]);
  });

  it("a retry that finds its first attempt still running (a resumable channel's run goes on without its client) waits for it: 409 idempotency_key_in_use, then its answer", async () => {
    const channel = await server.channel({ flow: "slow", resumableStreams: true });
    const { fetch, attempts } = lossyFetch(1, 300);
    const client = createClient({ baseUrl: server.url, apiKey: channel.key, fetch, retry: { maxRetries: 20, baseDelayMs: 100 } });
    const run = await client.execute({ payload: "Tell me a long story" });
    expect(run.status).toBe("success");
    expect(run.output?.messages[0]?.content).toMatch(/^word1 word2 .* word50$/);
    const statuses = attempts.map(({ status }) => status);
    expect(statuses[0]).toBeNull();
    expect(statuses.at(-1)).toBe(200);
    expect(attempts.at(-1)?.replayed).toBe("true");
    expect(statuses.slice(1, -1).length).toBeGreaterThan(0);
    expect(statuses.slice(1, -1).every((status) => status === 409)).toBe(true);
    expect(new Set(attempts.map(({ key }) => key)).size).toBe(1);
    expect(await userMessages(run.conversation_id)).toEqual(["Tell me a long story"]);
  }, 20_000);

  it("on a channel whose runs stop when their client leaves, an attempt cut off mid-run keeps nothing: the retry runs the flow (the first stored cancelled)", async () => {
    const channel = await server.channel({ flow: "slow" });
    // A conversation to follow the runs in: its opening stream closed at once.
    const opening = await createClient({ baseUrl: server.url, apiKey: channel.key }).stream({ payload: "opening" });
    await opening.cancel();
    const conversationId = opening.conversationId as string;
    const { fetch, attempts } = lossyFetch(1, 300);
    const client = createClient({ baseUrl: server.url, apiKey: channel.key, fetch, retry: { maxRetries: 20, baseDelayMs: 100 } });
    const run = await client.execute({ payload: "Start over", conversation_id: conversationId });
    expect(run.status).toBe("success");
    expect(attempts.at(-1)?.replayed).toBeNull();
    expect(new Set(attempts.map(({ key }) => key)).size).toBe(1);
    const messages = (await server.target.storage.listRecentMessages(conversationId, 100)).filter((message) => message.role === "user");
    expect(messages.map((message) => message.content)).toEqual(["opening", "Start over", "Start over"]);
    expect(await server.target.storage.findRun(messages[1]?.runId as string)).toMatchObject({ status: "cancelled" });
    expect(messages[2]?.runId).toBe(run.run_id);
  }, 20_000);

  it("each call has a key of its own; idempotencyKey sends the caller's, and the same key again answers the first run", async () => {
    const channel = await server.channel({ flow: "echo" });
    const { fetch, attempts } = lossyFetch(0);
    const client = createClient({ baseUrl: server.url, apiKey: channel.key, fetch });
    const first = await client.execute({ payload: "one" });
    await client.execute({ payload: "one", conversation_id: first.conversation_id });
    expect(attempts[0]?.key).not.toBe(attempts[1]?.key);

    const key = `order-${crypto.randomUUID()}`;
    const mine = await client.execute({ payload: "pay" }, { idempotencyKey: key });
    // Another process, later, with the same key: the first answer.
    const again = await createClient({ baseUrl: server.url, apiKey: channel.key }).execute({ payload: "pay" }, { idempotencyKey: key });
    expect(again).toEqual(mine);
    expect(attempts.at(-1)?.key).toBe(key);
    expect(await userMessages(mine.conversation_id)).toEqual(["pay"]);
    // Another body with it is refused, typed.
    await expect(client.execute({ payload: "pay twice" }, { idempotencyKey: key })).rejects.toMatchObject({
      status: 422,
      code: "idempotency_key_reused",
    });
  });

  it("a key is a random UUID v4, also where crypto.randomUUID is missing (a browser page on plain HTTP)", async () => {
    expect(newIdempotencyKey()).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const randomUUID = crypto.randomUUID;
    try {
      Object.defineProperty(crypto, "randomUUID", { value: undefined, configurable: true });
      const keys = Array.from({ length: 50 }, () => newIdempotencyKey());
      for (const key of keys) expect(key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(new Set(keys).size).toBe(50);
    } finally {
      Object.defineProperty(crypto, "randomUUID", { value: randomUUID, configurable: true });
    }
  });
});
