import { randomUUID } from "node:crypto";
import type { ApiKeyRecord, BeginRunInput, ChannelRecord, ClaimTurnInput, CompleteRunInput, NewMessage, RunRecord, RunTicket, Storage } from "@channelkit/core";
import { createTestDatabase, describeWithPostgres, type TestDatabase } from "@channelkit/testkit";
import pg from "pg";
import { afterAll, beforeAll, beforeEach, expect, it } from "vitest";
import { postgres } from "./postgres.js";
import type { KyselyStorage } from "./storage.js";

/*
 * On Postgres a run on an existing conversation claims its turn in one statement and stores
 * its outcome in another (data-modifying `WITH`), where SQLite and a Kysely of your own use a
 * transaction each: see docs/benchmarks.md, "Runs that take turns: what they cost". The
 * storage contract (storage.test.ts) checks what they store; these tests pin how many
 * statements they send, and the compare-and-set that skips ended tickets after the outcome.
 */
describeWithPostgres("Postgres runs in one statement", (serverUrl) => {
  const NOW = "2026-01-01T00:00:00.000Z";
  const LEASE = "2099-01-01T00:00:00.000Z";

  let database: TestDatabase;
  let pool: pg.Pool;
  /** The storage whose statements are counted (and can be held back, see `hold`). */
  let storage: KyselyStorage;
  /** Another instance on the same database. */
  let other: KyselyStorage;
  let channel: ChannelRecord;
  /** The statements `storage` sent since the last reset. */
  const sent: string[] = [];
  /** Called before each statement of `storage` is sent; the statement waits for what it returns. */
  let hold: ((text: string) => Promise<void> | undefined) | undefined;

  beforeAll(async () => {
    database = await createTestDatabase(serverUrl);
    pool = new pg.Pool({ connectionString: database.url, max: 4 });
    pool.on("connect", (client) => {
      const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
      (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
        const first = args[0];
        const text = typeof first === "string" ? first : String((first as { text?: unknown }).text);
        sent.push(text);
        const wait = hold?.(text);
        return wait ? wait.then(() => query(...args)) : query(...args);
      };
    });
    storage = postgres(pool);
    await storage.migrate();
    other = postgres(database.url);
    const tenant = { id: randomUUID(), name: "Acme", createdAt: NOW };
    await storage.createTenant(tenant);
    channel = channelRecord(tenant.id);
    await storage.createChannel(channel, keyRecord(channel));
  });

  afterAll(async () => {
    await storage?.close();
    await other?.close();
    await pool?.end();
    await database?.drop();
  });

  beforeEach(() => {
    hold = undefined;
  });

  /** What `action` sent, each statement by its kind: `with`, `begin`, `select`... */
  async function statementsOf(action: () => Promise<unknown>): Promise<string[]> {
    sent.length = 0;
    await action();
    return sent.splice(0).map((text) => (text.match(/^\s*(\w+)/)?.[1] ?? text).toLowerCase());
  }

  it("claims a turn in one statement, served at once or queued, and stores a claimed run's outcome in one", async () => {
    const conversationId = randomUUID();
    const first = runOn(channel, conversationId, "one", ["reply one"], true);
    expect(await statementsOf(() => ticketOf(storage, first.begin))).toEqual(["with"]);
    expect(await statementsOf(() => storage.completeRun(first.complete(0)))).toEqual(["with"]);

    // Served at once: the user message at the next turn index, from its start.
    const second = runOn(channel, conversationId, "two", ["reply two", "and more"]);
    let ticket: Awaited<ReturnType<KyselyStorage["beginRun"]>> | undefined;
    expect(
      await statementsOf(async () => {
        ticket = await ticketOf(storage, second.begin);
      }),
    ).toEqual(["with"]);
    expect(ticket?.ticket).toBe(1);
    expect(ticket?.claimed?.userMessage.turnIndex).toBe(2);
    expect(ticket?.claimed?.conversation).toMatchObject({ id: conversationId, nextTurn: 3 });
    expect(await storage.findRun(second.id)).toMatchObject({ status: "running" });

    // Queued behind it: a ticket, no message and no row; a recorded run has its row from its ticket on.
    const third = runOn(channel, conversationId, "three", ["reply three"]);
    expect(await statementsOf(async () => expect(await ticketOf(storage, third.begin)).toEqual({ ticket: 2, claimed: null }))).toEqual(["with"]);
    expect(await storage.findRun(third.id)).toBeNull();
    const recorded = runOn(channel, conversationId, "four", []);
    expect(await ticketOf(storage, { ...recorded.begin, stream: { aliveUntil: LEASE } })).toEqual({ ticket: 3, claimed: null });
    expect(await storage.findRun(recorded.id)).toMatchObject({ status: "running" });
    expect((await storage.listRecentMessages(conversationId, 10)).map((m) => m.content)).toEqual(["one", "reply one", "two"]);

    // With runs queued, the turn passes on in the same statement; one read finds the next run not ended.
    const stored = await storage.completeRun(second.complete(1, { step: 2 }));
    expect(stored.map((m) => [m.turnIndex, m.content])).toEqual([
      [3, "reply two"],
      [4, "and more"],
    ]);
    expect(await storage.findRun(second.id)).toMatchObject({ status: "success", executionOrder: ["echo"] });
    const claimed = await storage.claimTurn(third.claim(2));
    expect(claimed?.conversation.flowState).toEqual({ step: 2 });
    expect(claimed?.userMessage.turnIndex).toBe(5);
  });

  it("keeps the transaction for a run's mode change", async () => {
    const conversationId = randomUUID();
    const first = runOn(channel, conversationId, "one", [], true);
    await ticketOf(storage, first.begin);
    const handover = { ...first.complete(0), mode: { from: "bot" as const, since: NOW, to: "livechat_waiting" as const, at: NOW } };
    const statements = await statementsOf(() => storage.completeRun(handover));
    expect(statements[0]).toBe("begin");
    expect(statements.at(-1)).toBe("commit");
    expect(await storage.findConversation(conversationId)).toMatchObject({ mode: "livechat_waiting" });
  });

  it("skips ended tickets after the outcome only if the queue did not move meanwhile (a compare-and-set)", async () => {
    const conversationId = randomUUID();
    const first = runOn(channel, conversationId, "first", ["r1"], true);
    await ticketOf(storage, first.begin);
    const gone = runOn(channel, conversationId, "gone", []);
    const third = runOn(channel, conversationId, "third", ["r3"]);
    const fourth = runOn(channel, conversationId, "fourth", ["r4"]);
    for (const run of [gone, third, fourth]) expect((await ticketOf(storage, run.begin)).claimed).toBeNull();

    // The first run's outcome passes the turn to ticket 1. Before its follow-up reads which
    // tickets ended, the run of ticket 1, cancelled while it waited, stores itself on another
    // instance (passing the turn to ticket 2 itself); before the follow-up's write, ticket 2
    // runs to its end there and ticket 3 claims its turn.
    let step = 0;
    hold = (text) => {
      if (step === 0 && text.includes('"status" <>')) {
        step = 1;
        return other.completeRun(gone.cancelledWhileWaiting(1)).then(() => undefined);
      }
      if (step === 1 && text.startsWith('update "conversations" set "serving"')) {
        step = 2;
        return (async () => {
          expect(await other.claimTurn(third.claim(2))).not.toBeNull();
          await other.completeRun(third.complete(2, { by: "third" }));
          expect(await other.claimTurn(fourth.claim(3))).not.toBeNull();
        })();
      }
      return undefined;
    };
    await storage.completeRun(first.complete(0, { by: "first" }));
    hold = undefined;
    expect(step).toBe(2);

    // Ticket 3 still holds the turn: its outcome sets the state and passes the turn on.
    await storage.completeRun(fourth.complete(3, { by: "fourth" }));
    expect(await storage.findConversation(conversationId)).toMatchObject({ flowState: { by: "fourth" }, nextTurn: 7 });
    const fifth = runOn(channel, conversationId, "fifth", []);
    expect((await ticketOf(storage, fifth.begin)).claimed?.userMessage.turnIndex).toBe(7);
    expect((await storage.listRecentMessages(conversationId, 10)).map((m) => [m.turnIndex, m.content])).toEqual([
      [0, "first"],
      [1, "r1"],
      [2, "gone"],
      [3, "third"],
      [4, "r3"],
      [5, "fourth"],
      [6, "r4"],
      [7, "fifth"],
    ]);
  });
});

function channelRecord(tenantId: string): ChannelRecord {
  return {
    id: randomUUID(),
    tenantId,
    name: "c",
    type: "api",
    mode: "server",
    environment: "prod",
    state: "active",
    flowName: "echo",
    allowedOrigins: [],
    defaultStream: false,
    requireSignature: false,
    signingSecretEncrypted: null,
    apiKeyHint: null,
    clientId: null,
    languages: [],
    livechatMessages: {},
    livechatWaitTimeoutSeconds: null,
    runTimeoutSeconds: null,
    resumableStreams: false,
    rateLimits: null,
    widget: {},
    settings: {},
    sealedSettings: null,
    createdAt: "2026-01-01T00:00:00.000Z",
    updatedAt: "2026-01-01T00:00:00.000Z",
  };
}

function keyRecord(channel: ChannelRecord): ApiKeyRecord {
  return {
    id: randomUUID(),
    channelId: channel.id,
    tenantId: channel.tenantId,
    hash: `hash-${randomUUID()}`,
    prefix: "svc_live_",
    environment: "prod",
    hint: "svc_live_****abcd",
    createdAt: "2026-01-01T00:00:00.000Z",
    expiresAt: null,
    revokedAt: null,
  };
}

function newMessage(content: string, role: NewMessage["role"], runId: string): NewMessage {
  return {
    origin: "agent",
    role,
    content,
    timestamp: "2026-01-01T00:00:00.000Z",
    tokenCount: Math.ceil(content.length / 4),
    runId,
    stepId: role === "user" ? null : randomUUID(),
    nodeType: role === "user" ? null : "echo",
    toolCalls: null,
    toolCallId: null,
    livechatMessageId: null,
    sender: null,
    metadata: null,
  };
}

/** The inputs of one run on a conversation: its arrival, its claim when it waited, its outcome. */
function runOn(channel: ChannelRecord, conversationId: string, payload: string, replies: string[], isNew = false) {
  const NOW = "2026-01-01T00:00:00.000Z";
  const LEASE = "2099-01-01T00:00:00.000Z";
  const id = randomUUID();
  const run: RunRecord = {
    id,
    conversationId,
    channelId: channel.id,
    tenantId: channel.tenantId,
    status: "running",
    flowName: "echo",
    flowVersion: "1",
    result: null,
    error: null,
    executionOrder: [],
    startedAt: NOW,
    completedAt: NOW,
    durationMs: 0,
  };
  const conversation = { id: conversationId, tenantId: channel.tenantId, channelId: channel.id, isNew };
  const userMessage = newMessage(payload, "user", id);
  const begin: BeginRunInput = { conversation, run, userMessage, now: NOW, leaseUntil: LEASE };
  const claim = (ticket: number): ClaimTurnInput => ({ ...begin, conversation: { ...conversation, isNew: false }, ticket, claimUntil: LEASE });
  const complete = (ticket: number, flowState?: unknown): CompleteRunInput => ({
    run: { ...run, status: "success", result: { ok: true }, executionOrder: ["echo"], durationMs: 1000 },
    conversation: { ...conversation, isNew: false },
    ticket,
    claimed: true,
    messages: replies.map((content) => newMessage(content, "assistant", id)),
    ...(flowState === undefined ? {} : { flowState }),
    claimUntil: LEASE,
  });
  /** Cancelled before its turn came: its user message stored, its ticket given up. */
  const cancelledWhileWaiting = (ticket: number): CompleteRunInput => ({
    run: { ...run, status: "cancelled" },
    conversation: { ...conversation, isNew: false },
    ticket,
    claimed: false,
    messages: [userMessage],
    claimUntil: LEASE,
  });
  return { id, begin, claim, complete, cancelledWhileWaiting };
}

/** The ticket of a run that must get one (`beginRun` answers null only for a conversation that is not the run's). */
async function ticketOf(storage: Pick<Storage, "beginRun">, input: BeginRunInput): Promise<RunTicket> {
  const ticket = await storage.beginRun(input);
  if (ticket === null) throw new Error(`beginRun: conversation ${input.conversation.id} is not the run's`);
  return ticket;
}
