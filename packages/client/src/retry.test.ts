/**
 * When the client sends a request again, against real services on 127.0.0.1: a channel's rate
 * limits (429 with Retry-After), admin routes whose key set cannot be fetched (503), and a port
 * nothing listens on. The attempts are counted by a `fetch` that records what went out and
 * what came back.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { adminApi, type ChannelService, createChannelService, memoryStorage } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { type RunningServer, serve } from "@channelkit/node";
import { generateKeyPair, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChannelkitError, createClient } from "./index.js";
import { type Exchange, recordingFetch, startServer, type TestServer } from "./test-server.js";

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server?.close();
});

/** The rejection of `promise`, which must be a ChannelkitError. */
async function failure(promise: Promise<unknown>): Promise<ChannelkitError> {
  const error = await promise.then(
    () => {
      throw new Error("expected a rejection");
    },
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(ChannelkitError);
  return error as ChannelkitError;
}

/** A channel whose server key may send `requests` requests per `windowSeconds`. */
function limitedChannel(requests: number, windowSeconds: number) {
  return server.channel({ flow: "echo", rateLimits: { serverKey: { requests, windowSeconds } } });
}

/** A port on 127.0.0.1 that nothing listens on. */
async function closedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

describe("429: rate limited", () => {
  it("a GET is sent again once Retry-After has passed, and succeeds", async () => {
    const channel = await limitedChannel(1, 2);
    const recorder = recordingFetch();
    const client = createClient({ baseUrl: server.url, apiKey: channel.key, fetch: recorder.fetch });
    const run = await client.execute({ payload: "uses the window's one request" });
    const history = await client.history(run.conversation_id);
    expect(history.total_messages).toBe(2);
    expect(recorder.exchanges.map(({ method, status }) => [method, status])).toEqual([
      ["POST", 200],
      ["GET", 429],
      ["GET", 200],
    ]);
    const [, refused, served] = recorder.exchanges as [Exchange, Exchange, Exchange];
    const retryAfter = Number(refused.retryAfter);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(2);
    // The client waited what the service said, not less.
    expect(served.at - refused.at).toBeGreaterThanOrEqual(retryAfter * 1000 - 20);
  });

  it("retry: false throws the 429 at once, typed, with its retryAfter and the RateLimit fields", async () => {
    const channel = await limitedChannel(1, 60);
    const recorder = recordingFetch();
    const client = createClient({ baseUrl: server.url, apiKey: channel.key, fetch: recorder.fetch, retry: false });
    const run = await client.execute({ payload: "one" });
    const error = await failure(client.history(run.conversation_id));
    expect([error.status, error.code]).toEqual([429, "rate_limited"]);
    expect(error.retryAfter).toBeGreaterThanOrEqual(1);
    expect(error.retryAfter).toBeLessThanOrEqual(60);
    expect(error.headers?.get("ratelimit")).toMatch(/"server_key";r=0;t=\d+/);
    expect(recorder.exchanges).toHaveLength(2);
  });

  it("a Retry-After longer than maxDelayMs is not waited for: the error is thrown at once", async () => {
    const channel = await limitedChannel(1, 60);
    const recorder = recordingFetch();
    const client = createClient({ baseUrl: server.url, apiKey: channel.key, fetch: recorder.fetch, retry: { maxDelayMs: 1000 } });
    const run = await client.execute({ payload: "one" });
    const started = Date.now();
    const error = await failure(client.history(run.conversation_id));
    expect(Date.now() - started).toBeLessThan(1000);
    expect(error.code).toBe("rate_limited");
    expect(error.retryAfter).toBeGreaterThan(1);
    expect(recorder.exchanges.map(({ status }) => status)).toEqual([200, 429]);
  });

  it("an abort during the wait rejects at once with the abort", async () => {
    const channel = await limitedChannel(1, 5);
    const client = createClient({ baseUrl: server.url, apiKey: channel.key });
    const run = await client.execute({ payload: "one" });
    const started = Date.now();
    await expect(client.history(run.conversation_id, { signal: AbortSignal.timeout(200) })).rejects.toMatchObject({ name: "TimeoutError" });
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it("execute and stream carry an Idempotency-Key and are sent again after Retry-After, with the same key; without keys they are not, unless retry.unsafe", async () => {
    const channel = await limitedChannel(1, 2);
    const recorder = recordingFetch();
    const client = createClient({ baseUrl: server.url, apiKey: channel.key, fetch: recorder.fetch });
    await client.execute({ payload: "one" });
    const run = await client.execute({ payload: "two" });
    expect(run.output?.messages[0]?.content).toBe("Echo: two");
    const reply = await client.stream({ payload: "three" });
    expect(await reply.text()).toBe("Echo: three");
    const statuses = recorder.exchanges.map(({ status }) => status);
    // Each call refused while the window lasts, then sent again after Retry-After.
    expect(statuses[0]).toBe(200);
    expect(statuses.filter((status) => status === 200)).toHaveLength(3);
    expect(statuses.every((status) => status === 200 || status === 429)).toBe(true);
    const keys = recorder.exchanges.map(({ idempotencyKey }) => idempotencyKey);
    expect(keys.every((key) => key !== null && /^[0-9a-f-]{36}$/.test(key))).toBe(true);
    // One key per call, the same on each of its attempts.
    expect(new Set(keys).size).toBe(3);
    for (let i = 1; i < recorder.exchanges.length; i++) {
      const [before, after] = [recorder.exchanges[i - 1] as Exchange, recorder.exchanges[i] as Exchange];
      if (before.status === 429) {
        expect(after.idempotencyKey).toBe(before.idempotencyKey);
        expect(after.at - before.at).toBeGreaterThanOrEqual(Number(before.retryAfter) * 1000 - 20);
      }
    }

    const plain = await limitedChannel(1, 2);
    const unkeyed = recordingFetch();
    const without = createClient({ baseUrl: server.url, apiKey: plain.key, fetch: unkeyed.fetch, idempotencyKeys: false });
    await without.execute({ payload: "one" });
    expect((await failure(without.execute({ payload: "two" }))).code).toBe("rate_limited");
    expect((await failure(without.stream({ payload: "three" }))).code).toBe("rate_limited");
    expect(unkeyed.exchanges.map(({ method, status, idempotencyKey }) => [method, status, idempotencyKey])).toEqual([
      ["POST", 200, null],
      ["POST", 429, null],
      ["POST", 429, null],
    ]);

    const unsafe = recordingFetch();
    const opted = createClient({ baseUrl: server.url, apiKey: plain.key, fetch: unsafe.fetch, retry: { unsafe: true }, idempotencyKeys: false });
    const four = await opted.execute({ payload: "four" });
    expect(four.output?.messages[0]?.content).toBe("Echo: four");
    // Still in the first window: refused, then sent again after Retry-After. Or the window had
    // just ended: served at once.
    expect([[429, 200], [200]]).toContainEqual(unsafe.exchanges.map(({ status }) => status));
  });

  it("the webhook's startConversation is not sent again; newMessage, with its key, is", async () => {
    const channel = await server.channel({ flow: "echo", type: "webhook", rateLimits: { webhookClient: { requests: 1, windowSeconds: 2 } } });
    const recorder = recordingFetch();
    const webhook = createClient({ baseUrl: server.url, fetch: recorder.fetch }).webhook(channel.clientId as string);
    const started = await webhook.startConversation({ language: "en_US" });
    const error = await failure(webhook.startConversation({ language: "en_US" }));
    expect(error.code).toBe("rate_limited");
    expect(recorder.exchanges.map(({ status, idempotencyKey }) => [status, idempotencyKey])).toEqual([
      [200, null],
      [429, null],
    ]);
    recorder.exchanges.length = 0;
    const answered = await webhook.newMessage({ conversationId: started.conversation.conversation.id, userInput: "hi" });
    expect(answered.conversation.newEvents[0]?.data.rawContent).toBe("Echo: hi");
    const statuses = recorder.exchanges.map(({ status }) => status);
    expect([[429, 200], [200]]).toContainEqual(statuses);
    expect(new Set(recorder.exchanges.map(({ idempotencyKey }) => idempotencyKey)).size).toBe(1);
    expect(recorder.exchanges[0]?.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
  });
});

describe("503: the admin key set cannot be fetched", () => {
  let service: ChannelService;
  let running: RunningServer;
  let tenantId: string;
  let channelId: string;
  let token: string;

  beforeAll(async () => {
    // The admin routes verify RS256 tokens with a key set nothing serves: every admin call is 503 jwks_unavailable.
    const jwksUrl = `http://127.0.0.1:${await closedPort()}/jwks.json`;
    const storage = memoryStorage();
    await storage.migrate();
    service = await createChannelService({
      storage,
      flows: demoFlows,
      secretKey: "5b".repeat(32),
      logger: { warn() {}, error() {} },
      plugins: [adminApi({ jwksUrl })],
    });
    running = await serve(service, { port: 0 });
    tenantId = (await service.admin.createTenant({ name: "jwks" })).tenant.id;
    channelId = (await service.admin.createChannel({ tenantId, flow: "echo" })).channel.id;
    const { privateKey } = await generateKeyPair("RS256");
    token = await new SignJWT({ tenant_ids: [tenantId] }).setProtectedHeader({ alg: "RS256", kid: "k1" }).setExpirationTime("1h").sign(privateKey);
  });
  afterAll(async () => {
    await running?.close();
    await service?.close();
  });

  it("a 503 of the service's own configuration (flow_unavailable) is thrown at once, typed, never sent again", async () => {
    const channel = await server.channel({ flow: "echo" });
    // Bound to a flow this server does not register (as after a deploy that removed it).
    await server.target.storage.updateChannel(channel.id, { flowName: "retired" }, new Date().toISOString());
    const recorder = recordingFetch();
    const client = createClient({ baseUrl: server.url, apiKey: channel.key, fetch: recorder.fetch, retry: { baseDelayMs: 10 } });
    const error = await client.execute({ payload: "hello" }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ChannelkitError);
    expect(error).toMatchObject({ status: 503, code: "flow_unavailable" });
    expect(recorder.exchanges.map(({ method, status }) => [method, status])).toEqual([["POST", 503]]);
  });

  it("a GET is sent again at most maxRetries times with backoff, then throws the 503; a POST is sent once", async () => {
    const recorder = recordingFetch();
    const admin = createClient({ baseUrl: running.url, adminToken: token, fetch: recorder.fetch, retry: { maxRetries: 2, baseDelayMs: 50 } }).admin(tenantId);
    const error = await failure(admin.getChannel(channelId));
    expect([error.status, error.code]).toEqual([503, "jwks_unavailable"]);
    expect(recorder.exchanges.map(({ method, status }) => [method, status])).toEqual([
      ["GET", 503],
      ["GET", 503],
      ["GET", 503],
    ]);
    const [first, second, third] = recorder.exchanges.map(({ at }) => at) as [number, number, number];
    // Exponential backoff: 25-50 ms, then 50-100 ms.
    expect(second - first).toBeGreaterThanOrEqual(25);
    expect(third - second).toBeGreaterThanOrEqual(50);

    recorder.exchanges.length = 0;
    expect((await failure(admin.rotateKey(channelId))).code).toBe("jwks_unavailable");
    expect(recorder.exchanges.map(({ method, status }) => [method, status])).toEqual([["POST", 503]]);
  });
});

describe("no answer at all", () => {
  it("a GET to a port nothing listens on is tried 1 + maxRetries times, then network_error; so is execute, with one key; without keys, once", async () => {
    const recorder = recordingFetch();
    const port = await closedPort();
    const client = createClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: "svc_live_x", fetch: recorder.fetch, retry: { baseDelayMs: 10 } });
    const history = await failure(client.history(crypto.randomUUID()));
    expect([history.status, history.code]).toEqual([0, "network_error"]);
    expect(history.cause).toBeInstanceOf(Error);
    expect(recorder.exchanges.map(({ method, status }) => [method, status])).toEqual([
      ["GET", null],
      ["GET", null],
      ["GET", null],
    ]);
    recorder.exchanges.length = 0;
    expect((await failure(client.execute({ payload: "hi" }))).code).toBe("network_error");
    expect(recorder.exchanges).toHaveLength(3);
    expect(new Set(recorder.exchanges.map(({ idempotencyKey }) => idempotencyKey)).size).toBe(1);
    recorder.exchanges.length = 0;
    const unkeyed = createClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: "svc_live_x", fetch: recorder.fetch, idempotencyKeys: false });
    expect((await failure(unkeyed.execute({ payload: "hi" }))).code).toBe("network_error");
    expect(recorder.exchanges).toHaveLength(1);
  });
});
