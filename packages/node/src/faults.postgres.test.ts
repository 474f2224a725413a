import net from "node:net";
import { type ChannelService, createChannelService, defineFlow, type Logger, READY_STORAGE_TIMEOUT_MS, step, text, type UIStreamEvent } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { type KyselyStorage, postgres, type PostgresOptions } from "@channelkit/kysely";
import { createTestDatabase, describeWithPostgres, type TestDatabase } from "@channelkit/testkit";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, serve } from "./serve.js";

/*
 * Faults between the service and Postgres. A TCP proxy of this file sits between the
 * service's pool and the test server and can cut the link (connections reset, new ones
 * refused), black-hole it (connections stay open, nothing goes through: the TCP hang of a
 * real network partition) and restore it. The test process is the server: an unhandled
 * 'error' event of a pg client would crash it, and the tests record any such crash.
 */

/** Small timeouts, so a fault costs each test about a second and a half. */
const TIMEOUTS = {
  connectionTimeoutMs: 1000,
  statementTimeoutMs: 1000,
  queryTimeoutMs: 1500,
  idleInTransactionTimeoutMs: 1000,
} satisfies PostgresOptions;

/**
 * Longest any request may take while the database is unreachable: one timeout (waiting for
 * a connection, or for the answer to one statement), plus a second of slack for a busy
 * machine. A request that waited for two timeouts in a row fails this bound.
 */
const BOUND_MS = Math.max(TIMEOUTS.connectionTimeoutMs, TIMEOUTS.queryTimeoutMs) + 1000;

/** How soon a conversation answers again once the database is back (docs/reliability.md). */
const RECOVERY_MS = 5000;

const SECRET_KEY = "4f".repeat(32);
const EXECUTE = "/public/v1/api/execute";
const historyPath = (id: string) => `/public/v1/api/conversations/${id}/messages`;

// ---------------------------------------------------------------------------------------
// The fault-injecting TCP proxy

type Mode = "up" | "cut" | "dark";

interface Pair {
  client: net.Socket;
  upstream: net.Socket | null;
  /** Bytes held while the pair is dark, delivered if the link is restored. */
  toServer: Buffer[];
  toClient: Buffer[];
  clientClosed: boolean;
  upstreamClosed: boolean;
  dark: boolean;
  /** Dark for good: the link came back, but not for this connection (its peer never hears of it again). */
  lost: boolean;
}

/** A TCP proxy to `target` that can be cut, black-holed and restored. */
class FaultProxy {
  readonly #target: { host: string; port: number };
  readonly #server: net.Server;
  readonly #pairs = new Set<Pair>();
  #mode: Mode = "up";
  #trigger: { pattern: string; fault: "cut" | "dark"; fired: () => void } | null = null;

  constructor(target: { host: string; port: number }) {
    this.#target = target;
    this.#server = net.createServer((socket) => this.#accept(socket));
  }

  listen(): Promise<number> {
    return new Promise((resolve, reject) => {
      this.#server.once("error", reject);
      this.#server.listen(0, "127.0.0.1", () => resolve((this.#server.address() as net.AddressInfo).port));
    });
  }

  /** Hard cut: every open connection is reset, new ones are reset as soon as accepted. */
  cut(): void {
    this.#mode = "cut";
    for (const pair of this.#pairs) this.#destroy(pair);
  }

  /** Black hole: connections stay open (new ones are accepted) but no byte goes through. */
  blackHole(): void {
    this.#mode = "dark";
    for (const pair of this.#pairs) pair.dark = true;
  }

  /**
   * Arms a fault on the next client message containing `pattern` (e.g. a statement of a
   * transaction): that message is not delivered, and the proxy is cut or black-holed at
   * that instant. Resolves when it fired.
   */
  failOn(pattern: string, fault: "cut" | "dark"): Promise<void> {
    return new Promise((fired) => {
      this.#trigger = { pattern, fault, fired };
    });
  }

  /**
   * Forwards again. Held bytes of black-holed connections are delivered, as TCP does when a
   * partition heals; with `forgetOld`, those connections instead stay dark for good, as when
   * the peer gave up on them and the server was never told.
   */
  restore(options: { forgetOld?: boolean } = {}): void {
    this.#mode = "up";
    this.#trigger = null;
    for (const pair of this.#pairs) {
      if (!pair.dark) continue;
      if (options.forgetOld) {
        pair.lost = true;
        pair.toServer = [];
        pair.toClient = [];
        continue;
      }
      pair.dark = false;
      this.#flush(pair);
    }
  }

  close(): Promise<void> {
    for (const pair of this.#pairs) this.#destroy(pair);
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }

  #accept(client: net.Socket): void {
    client.on("error", () => undefined);
    if (this.#mode === "cut") {
      client.resetAndDestroy();
      return;
    }
    const pair: Pair = {
      client,
      upstream: null,
      toServer: [],
      toClient: [],
      clientClosed: false,
      upstreamClosed: false,
      dark: this.#mode === "dark",
      lost: false,
    };
    this.#pairs.add(pair);
    if (!pair.dark) this.#connectUpstream(pair);
    client.on("data", (chunk: Buffer) => {
      if (pair.lost) return;
      const trigger = this.#trigger;
      if (trigger && !pair.dark && chunk.includes(trigger.pattern)) {
        this.#trigger = null;
        if (trigger.fault === "cut") {
          this.cut();
        } else {
          this.blackHole();
          pair.toServer.push(chunk);
        }
        trigger.fired();
        return;
      }
      if (pair.dark) pair.toServer.push(chunk);
      else pair.upstream?.write(chunk);
    });
    client.on("close", () => {
      pair.clientClosed = true;
      if (!pair.dark && !pair.lost) pair.upstream?.end();
      if (pair.upstream === null || pair.upstreamClosed) this.#pairs.delete(pair);
    });
  }

  #connectUpstream(pair: Pair): void {
    const upstream = net.connect(this.#target.port, this.#target.host);
    pair.upstream = upstream;
    upstream.on("error", () => undefined);
    upstream.on("data", (chunk: Buffer) => {
      if (pair.lost) return;
      if (pair.dark) pair.toClient.push(chunk);
      else pair.client.write(chunk);
    });
    upstream.on("close", () => {
      pair.upstreamClosed = true;
      if (!pair.dark && !pair.lost) pair.client.end();
      if (pair.clientClosed) this.#pairs.delete(pair);
    });
  }

  #flush(pair: Pair): void {
    if (pair.upstream === null) {
      if (pair.clientClosed) {
        this.#pairs.delete(pair);
        return;
      }
      this.#connectUpstream(pair);
    }
    const upstream = pair.upstream as net.Socket;
    for (const chunk of pair.toServer.splice(0)) upstream.write(chunk);
    if (pair.clientClosed) upstream.end();
    for (const chunk of pair.toClient.splice(0)) pair.client.write(chunk);
    if (pair.upstreamClosed) pair.client.end();
  }

  #destroy(pair: Pair): void {
    pair.client.resetAndDestroy();
    pair.upstream?.destroy();
    this.#pairs.delete(pair);
  }
}

// ---------------------------------------------------------------------------------------
// A flow the tests hold in the middle of a run

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((done) => {
    resolve = done;
  });
  return { promise, resolve };
}

/** Set by a test before it starts a held run. */
let hold = { reached: deferred(), release: deferred() };

/** Replies, then, when the payload is "hold", waits for the test before it ends (and is stored). */
const heldFlow = defineFlow({
  name: "held",
  async *run(ctx) {
    yield step("held");
    yield text(`Held: ${ctx.payload}`);
    if (ctx.payload.startsWith("hold")) {
      hold.reached.resolve();
      await hold.release.promise;
    }
    return { payload: ctx.payload };
  },
});

// ---------------------------------------------------------------------------------------
// HTTP helpers

/** The events of an SSE body as they arrive. */
class EventReader {
  readonly #reader: ReadableStreamDefaultReader<string>;
  #buffer = "";

  constructor(response: Response) {
    if (!response.body) throw new Error("no body");
    this.#reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  }

  /** The next event, or null at the end of the stream. */
  async next(): Promise<UIStreamEvent | null> {
    for (;;) {
      const end = this.#buffer.indexOf("\n\n");
      if (end !== -1) {
        const frame = this.#buffer.slice(0, end);
        this.#buffer = this.#buffer.slice(end + 2);
        return JSON.parse(frame.replace(/^data: /, "")) as UIStreamEvent;
      }
      const { done, value } = await this.#reader.read();
      if (done) return null;
      this.#buffer += value;
    }
  }

  /** Every remaining event. */
  async rest(): Promise<UIStreamEvent[]> {
    const events: UIStreamEvent[] = [];
    for (let event = await this.next(); event; event = await this.next()) events.push(event);
    return events;
  }
}

async function timed<T>(action: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await action();
  return { value, ms: performance.now() - started };
}

interface HistoryEntry {
  role: string;
  content: string;
  turn_index: number;
  run_id: string | null;
}

// ---------------------------------------------------------------------------------------

describeWithPostgres("Postgres faults", (serverUrl) => {
  let database: TestDatabase;
  /** A direct connection, past the proxy, to check what is stored. */
  let direct: KyselyStorage;
  let proxy: FaultProxy;
  let service: ChannelService;
  let server: RunningServer;
  let echoKey: string;
  let heldKey: string;
  const logged: unknown[][] = [];
  const crashes: unknown[] = [];
  const onCrash = (error: unknown) => crashes.push(error);

  const logger: Logger = { warn() {}, error: (...args: unknown[]) => void logged.push(args) };

  beforeAll(async () => {
    process.on("uncaughtException", onCrash);
    process.on("unhandledRejection", onCrash);
    database = await createTestDatabase(serverUrl);
    direct = postgres(database.url);
    await direct.migrate();
    const target = new URL(database.url);
    proxy = new FaultProxy({ host: target.hostname, port: Number(target.port || 5432) });
    const proxyUrl = new URL(database.url);
    proxyUrl.hostname = "127.0.0.1";
    proxyUrl.port = String(await proxy.listen());
    service = await createChannelService({
      storage: postgres(proxyUrl.toString(), TIMEOUTS),
      flows: [...demoFlows, heldFlow],
      secretKey: SECRET_KEY,
      logger,
      // Long enough that a conversation answering again within RECOVERY_MS did not wait for
      // a failed run's lease: the run gave its turn back as soon as the database answered.
      turnLeaseMs: 20_000,
    });
    server = await serve(service, { port: 0 });
    const { tenant } = await service.admin.createTenant({ name: "faults" });
    echoKey = (await service.admin.createChannel({ tenantId: tenant.id, flow: "echo" })).api_key;
    heldKey = (await service.admin.createChannel({ tenantId: tenant.id, flow: "held" })).api_key;
  });

  afterEach(() => {
    proxy.restore();
    hold.release.resolve();
  });

  afterAll(async () => {
    await proxy?.close();
    await server?.close();
    await service?.close();
    await direct?.close();
    await database?.drop();
    process.off("uncaughtException", onCrash);
    process.off("unhandledRejection", onCrash);
  });

  function request(path: string, key: string, init: RequestInit = {}): Promise<Response> {
    return fetch(server.url + path, {
      ...init,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      // A hang fails the test here, with a message, instead of at vitest's timeout.
      signal: AbortSignal.timeout(BOUND_MS + 5000),
    });
  }

  function execute(key: string, body: Record<string, unknown>): Promise<Response> {
    return request(EXECUTE, key, { method: "POST", body: JSON.stringify(body) });
  }

  async function history(conversationId: string, key = echoKey): Promise<HistoryEntry[]> {
    const response = await request(historyPath(conversationId), key);
    expect(response.status).toBe(200);
    return ((await response.json()) as { messages: HistoryEntry[] }).messages;
  }

  /** A conversation of `runs` successful echo runs; returns its id. */
  async function conversation(runs: number, key = echoKey): Promise<string> {
    let id: string | undefined;
    for (let i = 0; i < runs; i++) {
      const response = await execute(key, { payload: `hello ${i}`, ...(id ? { conversation_id: id } : {}) });
      expect(response.status).toBe(200);
      id = ((await response.json()) as { conversation_id: string }).conversation_id;
    }
    return id as string;
  }

  /** The three request kinds while the database is unreachable: each a 500 envelope within the bound. */
  async function expectFastFailures(conversationId: string): Promise<number[]> {
    const attempts = [
      () => execute(echoKey, { payload: "json", conversation_id: conversationId }),
      () => execute(echoKey, { payload: "stream", conversation_id: conversationId, stream: true }),
      () => request(historyPath(conversationId), echoKey),
    ];
    const results = await Promise.all(
      attempts.map((attempt) =>
        timed(async () => {
          const response = await attempt();
          return { status: response.status, type: response.headers.get("content-type"), body: await response.json() };
        }),
      ),
    );
    for (const { value, ms } of results) {
      expect(value.status).toBe(500);
      expect(value.type).toMatch(/^application\/json/);
      expect(value.body).toEqual({ error: { code: "runtime_error", message: expect.any(String) } });
      expect(ms).toBeLessThan(BOUND_MS);
    }
    return results.map((result) => Math.round(result.ms));
  }

  /** After a fault: the next requests succeed at once, on the same process and service. */
  async function expectServiceBack(conversationId: string, turnsBefore: number, key = echoKey): Promise<void> {
    const response = await execute(key, { payload: "back", conversation_id: conversationId });
    expect(response.status).toBe(200);
    expect(((await response.json()) as { status: string }).status).toBe("success");
    const messages = await history(conversationId, key);
    expect(messages.map((m) => m.turn_index)).toEqual([...Array(turnsBefore + 2).keys()]);
    expect(messages.slice(-2).map((m) => m.content)).toEqual(["back", key === echoKey ? "Echo: back" : "Held: back"]);
    expect(crashes).toEqual([]);
  }

  describe("while the link is cut", () => {
    it("execute (JSON and stream) and history answer 500 runtime_error at once; then service resumes by itself", async () => {
      const id = await conversation(1);
      const before = logged.length;
      proxy.cut();
      const times = await expectFastFailures(id);
      expect(Math.max(...times)).toBeLessThan(1000); // refused connections fail without waiting for a timeout
      expect(logged.length).toBeGreaterThan(before); // a failure of the service is logged
      proxy.restore();
      await expectServiceBack(id, 2);
    });
  });

  describe("while the link is black-holed (TCP hangs)", () => {
    it("execute (JSON and stream) and history answer 500 runtime_error within the timeouts; then service resumes by itself", async () => {
      const id = await conversation(1);
      proxy.blackHole();
      await expectFastFailures(id);
      proxy.restore();
      await expectServiceBack(id, 2);
    });

    it("a stream that has begun ends with an error event, and no finish, when the database goes dark before its run is stored", async () => {
      hold = { reached: deferred(), release: deferred() };
      const response = await execute(heldKey, { payload: "hold", stream: true });
      expect(response.status).toBe(200);
      const events = new EventReader(response);
      const first = await events.next();
      expect(first?.type).toBe("data-run");
      const { run_id: runId, conversation_id: conversationId } = (first as Extract<UIStreamEvent, { type: "data-run" }>).data;
      const rest = events.rest();
      await hold.reached.promise;

      proxy.blackHole();
      const { value: tail, ms } = await timed(async () => {
        hold.release.resolve();
        return rest;
      });
      expect(ms).toBeLessThan(BOUND_MS);
      expect(tail.map((event) => event.type)).toEqual(["text-start", "text-delta", "text-end", "error"]);
      expect(tail.at(-1)).toEqual({ type: "error", errorText: expect.any(String) });

      // While the link is dark the run's outcome is not stored: the conversation exists from
      // its first event, with the user message, and the run is `running`.
      expect(await direct.findRun(runId)).toMatchObject({ status: "running" });
      expect((await direct.listRecentMessages(conversationId, 10)).map((m) => [m.turnIndex, m.role, m.content])).toEqual([[0, "user", "hold"]]);
      proxy.restore();
      // The run's outcome is one statement on Postgres (docs/benchmarks.md, "Runs that take
      // turns: what they cost"), sent before the service gave up on it: when the link heals
      // and its bytes arrive, it is stored whole (in doubt for the client, as a COMMIT in flight
      // always was), never half: the reply at the next turn with the run's outcome.
      await expect.poll(async () => (await direct.findRun(runId))?.status, { timeout: 5000 }).toBe("success");
      expect((await history(conversationId, heldKey)).map((m) => [m.turn_index, m.role, m.content])).toEqual([
        [0, "user", "hold"],
        [1, "assistant", "Held: hold"],
      ]);
      const again = await execute(heldKey, { payload: "after", stream: true });
      expect((await new EventReader(again).rest()).at(-1)).toEqual({
        type: "finish",
        finishReason: "stop",
        messageMetadata: { status: "success", livechat_mode: null },
      });
      expect(crashes).toEqual([]);
    });
  });

  describe("a failure in the middle of storing a run", () => {
    /**
     * Streams a held run on `conversationId`; once it holds its turn (its claim is stored),
     * arms the fault and lets the run end, so that the fault fires inside the transaction
     * that stores its outcome.
     */
    async function runInterrupted(conversationId: string, arm: () => Promise<void>) {
      hold = { reached: deferred(), release: deferred() };
      const response = await execute(heldKey, { payload: "hold lost words", conversation_id: conversationId, stream: true });
      expect(response.status).toBe(200);
      const events = new EventReader(response);
      const first = (await events.next()) as Extract<UIStreamEvent, { type: "data-run" }>;
      expect(first.type).toBe("data-run");
      const rest = events.rest();
      await hold.reached.promise;
      const fired = arm();
      const { value, ms } = await timed(async () => {
        hold.release.resolve();
        return rest;
      });
      await fired;
      expect(ms).toBeLessThan(BOUND_MS);
      expect(value.at(-1)).toEqual({ type: "error", errorText: expect.any(String) });
      expect(value.some((event) => event.type === "finish")).toBe(false);
      return first.data.run_id;
    }

    async function storedTurns(conversationId: string) {
      const row = await direct.db.selectFrom("conversations").select("next_turn").where("id", "=", conversationId).executeTakeFirstOrThrow();
      return Number(row.next_turn);
    }

    it("a link cut as the run's outcome is sent leaves no half-written turn; the lapsed run is taken over", async () => {
      const id = await conversation(2, heldKey);
      const before = await history(id, heldKey);
      expect(before.map((m) => m.turn_index)).toEqual([0, 1, 2, 3]);

      // The outcome is one statement on Postgres (docs/benchmarks.md, "Runs that take turns:
      // what they cost"), the one carrying the reply: it does not reach the server.
      const runId = await runInterrupted(id, () => proxy.failOn("Held: hold lost words", "cut"));

      proxy.restore();
      const restored = Date.now();
      // The run gives its turn back as soon as the database answers: stored as an error that
      // says its client was answered with one, after its user message (its claim stayed),
      // with nothing of its lost outcome; the next run does not wait for the lease.
      await expect
        .poll(async () => direct.findRun(runId), { timeout: RECOVERY_MS })
        .toMatchObject({ status: "error", error: expect.stringContaining("could not store this run") });
      await expectServiceBack(id, 5, heldKey);
      expect(Date.now() - restored).toBeLessThan(RECOVERY_MS);
      const after = await history(id, heldKey);
      expect(after.slice(0, 4)).toEqual(before);
      expect(after.slice(4).map((m) => [m.turn_index, m.role, m.content])).toEqual([
        [4, "user", "hold lost words"],
        [5, "user", "back"],
        [6, "assistant", "Held: back"],
      ]);
      expect(await storedTurns(id)).toBe(7);
    });

    it("a transaction abandoned in a black hole releases the conversation: its next run succeeds", async () => {
      expect(TIMEOUTS.idleInTransactionTimeoutMs).toBeLessThan(TIMEOUTS.queryTimeoutMs);
      const id = await conversation(1, heldKey);
      const before = await history(id, heldKey);

      // A run holds the turn; a second one waits for it (its ticket taken, its stream begun).
      hold = { reached: deferred(), release: deferred() };
      const holding = await execute(heldKey, { payload: "hold", conversation_id: id, stream: true });
      const holdingEvents = new EventReader(holding);
      expect((await holdingEvents.next())?.type).toBe("data-run");
      await hold.reached.promise;
      const waiting = await execute(heldKey, { payload: "queued words", conversation_id: id, stream: true });
      const waitingEvents = new EventReader(waiting);
      const waitingRun = (await waitingEvents.next()) as Extract<UIStreamEvent, { type: "data-run" }>;
      expect(waitingRun.type).toBe("data-run");

      // The first run ends and passes the turn on; the waiting run claims it in a transaction
      // (the outcome and a claim on arrival are one statement each on Postgres, see
      // docs/benchmarks.md, "Runs that take turns: what they cost"): the conversation row is
      // locked and updated, and the link goes dark as its user message is inserted (the first
      // statement to carry it). The service gives up; the server never hears of it again.
      const fired = proxy.failOn("queued words", "dark");
      hold.release.resolve();
      expect((await holdingEvents.rest()).at(-1)).toMatchObject({ type: "finish" });
      await fired;
      const { value: tail, ms } = await timed(() => waitingEvents.rest());
      expect(ms).toBeLessThan(BOUND_MS);
      expect(tail.at(-1)).toEqual({ type: "error", errorText: expect.any(String) });
      proxy.restore({ forgetOld: true });

      // The server ended the abandoned transaction idleInTransactionTimeoutMs after its last
      // statement, before the service even gave up on it (queryTimeoutMs), so the row lock it
      // held is gone. The waiting run gives its ticket back once the database answers: stored
      // as an error with its user message, which its client was told of (the `error` event);
      // the next run takes the turn after it, without waiting for a lease.
      const restored = Date.now();
      await expect
        .poll(async () => direct.findRun(waitingRun.data.run_id), { timeout: RECOVERY_MS })
        .toMatchObject({ status: "error", error: expect.stringContaining("could not store this run") });
      const response = await execute(heldKey, { payload: "back", conversation_id: id });
      expect(response.status).toBe(200);
      expect(Date.now() - restored).toBeLessThan(RECOVERY_MS);
      const after = await history(id, heldKey);
      expect(after.slice(0, before.length)).toEqual(before);
      expect(after.map((m) => [m.turn_index, m.content])).toEqual([
        [0, "hello 0"],
        [1, "Held: hello 0"],
        [2, "hold"],
        [3, "Held: hold"],
        [4, "queued words"],
        [5, "back"],
        [6, "Held: back"],
      ]);
      expect(crashes).toEqual([]);
    });
  });

  it("GET /readyz is 503 storage unreachable while the database is cut or silent (within its 2 s), 200 once it answers again; /healthz stays 200", async () => {
    const probe = async (path: string) => {
      const response = await fetch(server.url + path, { signal: AbortSignal.timeout(BOUND_MS + 5000) });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };
    expect(await probe("/readyz")).toEqual({
      status: 200,
      body: { status: "ready", storage: "ok", migrations: "current", pending: [], draining: false },
    });
    proxy.cut();
    expect(await probe("/readyz")).toEqual({
      status: 503,
      body: { status: "not_ready", storage: "unreachable", migrations: "unknown", pending: [], draining: false },
    });
    expect(await probe("/healthz")).toEqual({ status: 200, body: { status: "ok" } });
    proxy.restore();
    expect((await probe("/readyz")).status).toBe(200);
    // A database that accepts and never answers: the probe does not wait past its bound.
    proxy.blackHole();
    const { value: silent, ms } = await timed(() => probe("/readyz"));
    expect(silent).toMatchObject({ status: 503, body: { storage: "unreachable" } });
    expect(ms).toBeLessThan(READY_STORAGE_TIMEOUT_MS + 1000);
    proxy.restore({ forgetOld: true });
    // Ready again once the pool has replaced the connections lost in the black hole (each within its query timeout).
    const deadline = Date.now() + 10_000;
    let again = await probe("/readyz");
    while (again.status !== 200 && Date.now() < deadline) again = await probe("/readyz");
    expect(again).toMatchObject({ status: 200, body: { storage: "ok" } });
  });

  it("the process never crashed, and the service still answers", async () => {
    expect(crashes).toEqual([]);
    const id = await conversation(1);
    expect((await history(id)).length).toBe(2);
  });
});
