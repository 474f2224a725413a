/**
 * Two `channelkit serve` processes on one database (a SQLite file, then a Postgres
 * database): concurrent executes on one conversation split across both get contiguous turn
 * indexes with nothing lost or duplicated, and a change made by a third process (the
 * `channelkit` command) is refused by both servers on their very next request.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import { openStorage } from "@channelkit/kysely";
import { signRequestBody } from "@channelkit/core";
import { describeWithPostgres } from "@channelkit/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, killAll, runCliJson, type ServeProcess, startServe } from "./test-process.js";
import { type CreatedChannel, execute, type HistoryMessage, type RunDocument, run, type StreamEvent, postgresDatabase, sqliteDatabase } from "./test-runs.js";

const ENV = { CHANNELKIT_SECRET_KEY: randomBytes(32).toString("hex"), CHANNELKIT_ADMIN_JWT_SECRET: randomBytes(32).toString("hex") };

/** Asserts the execute answered `status` with the envelope's `code`. */
async function expectRefused(response: Response, status: number, code: string, where: string): Promise<void> {
  const body = await response.text();
  expect(response.status, `${where}: ${body}`).toBe(status);
  expect((JSON.parse(body) as { error: { code: string } }).error.code, where).toBe(code);
}

/** Asserts the execute ran the echo flow. */
async function expectAccepted(response: Response, where: string): Promise<void> {
  const body = await response.text();
  expect(response.status, `${where}: ${body}`).toBe(200);
  expect((JSON.parse(body) as RunDocument).status, where).toBe("success");
}

/**
 * The two-process suite on the database `open()` provides (a SQLite file path or a
 * Postgres URL), removed by `drop()` once both servers are gone.
 */
function twoServers(open: () => Promise<{ db: string; drop(): Promise<void> }>) {
  let db: string;
  let drop: (() => Promise<void>) | undefined;
  let tenantId: string;
  let servers: ServeProcess[] = [];
  /** One channel per test, made by the CLI before the tests run. */
  let channels: Record<"turns" | "state" | "origins" | "rotate" | "slow" | "admin" | "webhook" | "widget", CreatedChannel>;
  /** Every key, signing secret and admin token shown in clear during the suite: none may be stored or logged. */
  const shown: string[] = [];

  const cli = <T = any>(...args: string[]) => runCliJson<T>([...args, "--db", db], ENV);
  const createChannel = (...extra: string[]) => cli<CreatedChannel>("channel", "create", "--tenant", tenantId, "--flow", "echo", ...extra);
  const createSlowChannel = () => cli<CreatedChannel>("channel", "create", "--tenant", tenantId, "--flow", "slow");

  beforeAll(async () => {
    await ensureBuilt();
    ({ db, drop } = await open());
    tenantId = (await cli<{ tenant: { id: string } }>("tenant", "create", "--name", "Multi")).tenant.id;
    // Processes side by side (SQLite writers queue on the busy timeout); saves a second or two.
    const [[turns, state, origins, rotate, slow, admin, webhook, widget], started] = await Promise.all([
      Promise.all([
        createChannel(),
        createChannel(),
        createChannel("--mode", "public", "--allowed-origin", "https://a.example"),
        createChannel(),
        createSlowChannel(),
        createChannel("--require-signature"),
        createChannel("--type", "webhook", "--languages", "en_US,fr_FR"),
        createChannel("--mode", "public", "--allowed-origin", "https://shop.example"),
      ]),
      Promise.all([0, 1].map(() => startServe(["--db", db, "--port", "0"], ENV))),
    ]);
    channels = { turns, state, origins, rotate, slow, admin, webhook, widget };
    for (const created of Object.values(channels)) shown.push(created.api_key, ...(created.signing_secret ? [created.signing_secret] : []));
    servers = started;
  }, 120_000);

  afterAll(async () => {
    // Runs even when beforeAll or a test failed: kills every process started, then drops the database.
    await killAll();
    await drop?.();
  });

  it("allocates turns 0..101 with no gap or duplicate for 50 concurrent executes split across both servers", async () => {
    const { channel, api_key: key } = channels.turns;
    const [a, b] = servers as [ServeProcess, ServeProcess];
    expect(a.child.pid).not.toBe(b.child.pid);
    expect(a.url).not.toBe(b.url);

    const opening = await run(a, key, { payload: "opening message" });
    expect(opening).toMatchObject({ status: 200, outcome: "success", reply: "Echo: opening message" });
    const conversationId = opening.conversationId;

    // 50 executes at once: i % 2 picks the server, (i >> 1) % 2 the mode, so each server gets both.
    const sent = Array.from({ length: 50 }, (_, i) => ({
      server: i % 2 === 0 ? a : b,
      body: { payload: `message ${i} ${randomUUID()}`, conversation_id: conversationId, stream: (i >> 1) % 2 === 1 },
    }));
    const results = await Promise.all(sent.map(({ server, body }) => run(server, key, body)));

    results.forEach((result, i) => {
      const { body } = sent[i] as (typeof sent)[number];
      expect(result, `execute ${i} (${body.stream ? "stream" : "json"})`).toMatchObject({
        status: 200,
        outcome: "success",
        conversationId,
        reply: `Echo: ${body.payload}`,
      });
    });
    const runIds = [opening.runId, ...results.map((r) => r.runId)];
    expect(new Set(runIds).size).toBe(51);

    // Both servers show the same history: 102 messages, turn_index 0..101, grouped per run.
    const histories = await Promise.all(
      servers.map(async (server) => {
        const response = await fetch(`${server.url}/public/v1/api/conversations/${conversationId}/messages?limit=200`, {
          headers: { Authorization: `Bearer ${key}` },
        });
        expect(response.status).toBe(200);
        return (await response.json()) as { total_messages: number; messages: HistoryMessage[] };
      }),
    );
    expect(histories[1]).toEqual(histories[0]);
    const { total_messages, messages } = histories[0] as { total_messages: number; messages: HistoryMessage[] };
    expect(total_messages).toBe(102);
    expect(messages.map((m) => m.turn_index)).toEqual(Array.from({ length: 102 }, (_, i) => i));

    const payloads = ["opening message", ...sent.map((s) => s.body.payload)];
    const seenPayloads: string[] = [];
    const seenRuns: string[] = [];
    for (let i = 0; i < messages.length; i += 2) {
      const user = messages[i] as HistoryMessage;
      const reply = messages[i + 1] as HistoryMessage;
      expect(user, `turn ${i}`).toMatchObject({ origin: "agent", role: "user" });
      expect(reply, `turn ${i + 1}`).toMatchObject({ origin: "agent", role: "assistant", content: `Echo: ${user.content}`, run_id: user.run_id });
      seenPayloads.push(user.content);
      seenRuns.push(user.run_id as string);
    }
    expect(seenPayloads.sort()).toEqual([...payloads].sort());
    expect(seenRuns.sort()).toEqual([...runIds].sort());

    // Storage holds exactly these 51 runs, all successful, and the counter went to 102.
    const storage = openStorage(db);
    try {
      const runs = await storage.db.selectFrom("runs").select(["id", "status", "result"]).where("conversation_id", "=", conversationId).execute();
      expect(runs.map((r) => r.id).sort()).toEqual([...runIds].sort());
      expect(runs.every((r) => r.status === "success")).toBe(true);
      // Runs took turns: each saw the flow state the previous one stored, on either server.
      const turns = runs.map((r) => (JSON.parse(r.result as string) as { turn: number }).turn).sort((x, y) => x - y);
      expect(turns).toEqual(Array.from({ length: 51 }, (_, i) => i + 1));
      const conversation = await storage.db
        .selectFrom("conversations")
        .select(["next_turn", "channel_id"])
        .where("id", "=", conversationId)
        .executeTakeFirstOrThrow();
      expect(Number(conversation.next_turn)).toBe(102);
      expect(conversation.channel_id).toBe(channel.id);
    } finally {
      await storage.close();
    }
  }, 30_000);

  it("a conversation started on one server is usable on the other from its first event", async () => {
    const { api_key: key } = channels.slow;
    const [a, b] = servers as [ServeProcess, ServeProcess];
    const streaming = new AbortController();
    const response = await execute(a, key, { payload: "first", stream: true }, {}, streaming.signal);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    let text = "";
    while (!text.includes("\n\n")) {
      const { value, done } = await reader.read();
      if (done) throw new Error("the stream ended before its first event");
      text += new TextDecoder().decode(value);
    }
    const first = JSON.parse(text.slice(0, text.indexOf("\n\n")).replace(/^data: /, "")) as StreamEvent;
    const conversationId = first.data?.conversation_id as string;
    expect(first.type).toBe("data-run");

    // On the other server, at once: history shows the run's user message...
    const during = await fetch(`${b.url}/public/v1/api/conversations/${conversationId}/messages`, { headers: { Authorization: `Bearer ${key}` } });
    expect(during.status).toBe(200);
    const body = (await during.json()) as { messages: HistoryMessage[] };
    expect(body.messages.map((m) => [m.turn_index, m.role, m.content])).toEqual([[0, "user", "first"]]);
    // ...and an execute resuming it is accepted there (it waits its turn; gone before it comes).
    const waiting = new AbortController();
    const resumed = await execute(b, key, { payload: "second", stream: true, conversation_id: conversationId }, {}, waiting.signal);
    expect(resumed.status).toBe(200);
    waiting.abort();
    streaming.abort();
  });

  it("webhook: a conversation started on one server goes on on both; concurrent messages across them keep turns contiguous", async () => {
    const [a, b] = servers as [ServeProcess, ServeProcess];
    const clientId = channels.webhook.channel.client_id as string;
    const post = async (server: ServeProcess, route: string, body: unknown) => {
      const response = await fetch(`${server.url}/channels/webhook/${clientId}/${route}`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
      const text = await response.text();
      expect(response.status, text).toBe(200);
      return JSON.parse(text);
    };
    const started = await post(a, "startConversation", { language: "fr_FR", integrationContext: {} });
    const conversationId = started.conversation.conversation.id as string;
    expect(started.conversation.newMessages.newEvents[0].data.rawContent).toBe("Hello! How can I help you?");
    const inputs = Array.from({ length: 20 }, (_, i) => `webhook ${i}`);
    const replies = await Promise.all(inputs.map((userInput, i) => post(i % 2 === 0 ? a : b, "newMessage", { conversationId, userInput })));
    expect(replies.map((reply) => reply.conversation.newEvents.map((event: { data: { rawContent: string } }) => event.data.rawContent))).toEqual(
      inputs.map((input) => [`Echo: ${input}`]),
    );
    const storage = openStorage(db);
    try {
      const messages = await storage.listRecentMessages(conversationId, 100);
      expect(messages.map((m) => m.turnIndex)).toEqual(Array.from({ length: 41 }, (_, i) => i));
      expect(await storage.findConversation(conversationId)).toMatchObject({ language: "fr_FR", flowState: { turn: 20 } });
    } finally {
      await storage.close();
    }
  });

  it("widget: the first requests of one AI SDK chat id on both servers at once make one conversation; later ones go on in it", async () => {
    const { api_key: key } = channels.widget;
    const chatId = `chat-${randomUUID()}`;
    const chat = async (server: ServeProcess, text: string) => {
      const response = await fetch(`${server.url}/public/widget/chat`, {
        method: "POST",
        headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json", Origin: "https://shop.example" },
        body: JSON.stringify({ id: chatId, messages: [{ id: randomUUID(), role: "user", parts: [{ type: "text", text }] }], trigger: "submit-message" }),
      });
      const body = await response.text();
      expect(response.status, body).toBe(200);
      const events = body
        .split("\n\n")
        .filter(Boolean)
        .map((frame) => JSON.parse(frame.replace(/^data: /, "")) as StreamEvent);
      expect(events.at(-1)?.type).toBe("finish");
      return events[0]?.data?.conversation_id as string;
    };
    const [a, b] = servers as [ServeProcess, ServeProcess];
    const firsts = await Promise.all([chat(a, "a1"), chat(b, "b1"), chat(a, "a2"), chat(b, "b2")]);
    expect(new Set(firsts).size).toBe(1);
    expect(await chat(b, "later")).toBe(firsts[0]);
    const storage = openStorage(db);
    try {
      const messages = await storage.listRecentMessages(firsts[0] as string, 100);
      expect(messages.map((m) => m.turnIndex)).toEqual(Array.from({ length: 10 }, (_, i) => i));
      expect(
        messages
          .filter((m) => m.role === "user")
          .map((m) => m.content)
          .sort(),
      ).toEqual(["a1", "a2", "b1", "b2", "later"]);
    } finally {
      await storage.close();
    }
  });

  describe("a change made by a third process is seen by both servers on their very next request", () => {
    it("channel update --state inactive: 409 channel_inactive on both; --state active: both run again", async () => {
      const { channel, api_key: key } = channels.state;
      // Each server has just served the channel: anything it would cache is warm.
      for (const [i, server] of servers.entries()) await expectAccepted(await execute(server, key, { payload: "before" }), `server ${i} before`);

      await cli("channel", "update", channel.id, "--state", "inactive");
      for (const [i, server] of servers.entries()) {
        await expectRefused(await execute(server, key, { payload: "while inactive" }), 409, "channel_inactive", `server ${i} inactive`);
      }

      await cli("channel", "update", channel.id, "--state", "active");
      for (const [i, server] of servers.entries()) await expectAccepted(await execute(server, key, { payload: "again" }), `server ${i} reactivated`);
    });

    it("channel update --allowed-origin: the replaced origin is 403 origin_not_allowed on both, the new one runs", async () => {
      const { channel, api_key: key } = channels.origins;
      expect(key.startsWith("svc_pub_")).toBe(true);
      for (const [i, server] of servers.entries()) {
        await expectAccepted(await execute(server, key, { payload: "from a" }, { Origin: "https://a.example" }), `server ${i} origin a before`);
      }

      await cli("channel", "update", channel.id, "--allowed-origin", "https://b.example");
      for (const [i, server] of servers.entries()) {
        await expectRefused(
          await execute(server, key, { payload: "from a" }, { Origin: "https://a.example" }),
          403,
          "origin_not_allowed",
          `server ${i} origin a after`,
        );
      }
      for (const [i, server] of servers.entries()) {
        await expectAccepted(await execute(server, key, { payload: "from b" }, { Origin: "https://b.example" }), `server ${i} origin b after`);
      }
    });

    it("channel rotate-key: the old key is 401 invalid_api_key on both at once, the new key runs on both", async () => {
      const { channel, api_key: oldKey } = channels.rotate;
      for (const [i, server] of servers.entries()) await expectAccepted(await execute(server, oldKey, { payload: "old key" }), `server ${i} old key before`);

      const { api_key: newKey } = await cli<{ api_key: string }>("channel", "rotate-key", channel.id);
      expect(newKey).not.toBe(oldKey);
      for (const [i, server] of servers.entries()) {
        await expectRefused(await execute(server, oldKey, { payload: "old key" }), 401, "invalid_api_key", `server ${i} old key after`);
      }
      for (const [i, server] of servers.entries()) await expectAccepted(await execute(server, newKey, { payload: "new key" }), `server ${i} new key`);
    });
  });

  describe("the admin routes of either server act for both, with a token from channelkit admin-token", () => {
    const admin = async (server: ServeProcess, method: string, path: string, body?: unknown) => {
      const { token } = await cli<{ token: string }>("admin-token", "--tenant", tenantId);
      shown.push(token);
      const response = await fetch(`${server.url}/api/v1/channels/${channels.admin.channel.id}${path}`, {
        method,
        headers: { Authorization: `Bearer ${token}`, "X-Tenant-ID": tenantId, ...(body ? { "Content-Type": "application/json" } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      const text = await response.text();
      expect(response.status, text).toBe(200);
      return JSON.parse(text) as Record<string, any>;
    };
    const signed = async (server: ServeProcess, key: string, secret: string) => {
      const raw = JSON.stringify({ payload: "signed" });
      return fetch(`${server.url}/public/v1/api/execute`, {
        method: "POST",
        headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json", "X-Service-Signature": await signRequestBody(secret, raw) },
        body: raw,
      });
    };

    it("rotate-key through one, rotate-signing-secret and PATCH through the other: both servers follow at once; the audit trail has all three", async () => {
      const [a, b] = servers as [ServeProcess, ServeProcess];
      const { api_key: oldKey, signing_secret: oldSecret } = channels.admin as CreatedChannel & { signing_secret: string };
      for (const server of servers) await expectAccepted(await signed(server, oldKey, oldSecret), "before");

      const { api_key: newKey } = await admin(a, "POST", "/rotate-key");
      shown.push(newKey);
      for (const [i, server] of servers.entries()) {
        await expectRefused(await signed(server, oldKey, oldSecret), 401, "invalid_api_key", `server ${i} old key`);
        await expectAccepted(await signed(server, newKey, oldSecret), `server ${i} new key`);
      }

      const { signing_secret: newSecret } = await admin(b, "POST", "/rotate-signing-secret");
      shown.push(newSecret);
      for (const [i, server] of servers.entries()) {
        await expectRefused(await signed(server, newKey, oldSecret), 401, "invalid_signature", `server ${i} old secret`);
        await expectAccepted(await signed(server, newKey, newSecret), `server ${i} new secret`);
      }

      expect((await admin(b, "PATCH", "", { state: "inactive" })).channel.state).toBe("inactive");
      for (const [i, server] of servers.entries()) {
        await expectRefused(await signed(server, newKey, newSecret), 409, "channel_inactive", `server ${i} inactive`);
      }
      expect((await admin(a, "GET", "")).channel.state).toBe("inactive");

      const { events } = await cli<{ events: { operation: string; via: string; outcome: string }[] }>(
        "audit",
        "--tenant",
        tenantId,
        "--channel",
        channels.admin.channel.id,
      );
      expect(events.map((e) => [e.operation, e.via, e.outcome])).toEqual([
        ["update_channel", "http", "success"],
        ["rotate_signing_secret", "http", "success"],
        ["rotate_key", "http", "success"],
        ["create_channel", "service", "success"],
      ]);
    });

    it("no key, signing secret or admin token shown during the suite is in the database or in either server's output", async () => {
      expect(shown.length).toBeGreaterThan(8);
      const output = servers.map((server) => `${server.lines.join("\n")}\n${server.stderr()}`).join("\n");
      const stored = await storedText(db);
      for (const secret of shown) {
        expect(stored.includes(secret), "stored in the database").toBe(false);
        expect(output.includes(secret), "in a server's output").toBe(false);
      }
      // The check can see what is there: a hint and a channel id are in the database.
      expect(stored).toContain(channels.admin.channel.id);
    });
  });
}

/**
 * Everything a database holds, as text: the SQLite file and its write-ahead log byte for
 * byte, or every row of every Postgres table.
 */
async function storedText(db: string): Promise<string> {
  if (!db.startsWith("postgres")) {
    const parts = await Promise.all(["", "-wal"].map((suffix) => readFile(`${db}${suffix}`).catch(() => Buffer.alloc(0))));
    return Buffer.concat(parts).toString("latin1");
  }
  const storage = openStorage(db);
  try {
    const tables = await storage.db
      .selectFrom("information_schema.tables" as any)
      .select("table_name" as any)
      .where("table_schema" as any, "=", "public")
      .execute();
    const texts: string[] = [];
    for (const { table_name } of tables as { table_name: string }[]) {
      const rows = await storage.db
        .selectFrom(table_name as any)
        .selectAll()
        .execute();
      texts.push(JSON.stringify(rows));
    }
    return texts.join("\n");
  } finally {
    await storage.close();
  }
}

/**
 * An instance killed in the middle of a run: the other instance's next run on that
 * conversation takes its turn over once the lease lapses, and stores the lost run cancelled.
 */
function takeOverAfterACrash(open: () => Promise<{ db: string; drop(): Promise<void> }>) {
  it("a server killed mid-run: the other server's next run on the conversation takes the turn over after the lease", async () => {
    await ensureBuilt();
    const { db, drop } = await open();
    try {
      const cli = <T = any>(...args: string[]) => runCliJson<T>([...args, "--db", db], ENV);
      const tenantId = (await cli<{ tenant: { id: string } }>("tenant", "create", "--name", "Crash")).tenant.id;
      const { api_key: key } = await cli<CreatedChannel>("channel", "create", "--tenant", tenantId, "--flow", "slow");
      const [a, b] = (await Promise.all([0, 1].map(() => startServe(["--db", db, "--port", "0", "--turn-lease-ms", "1000"], ENV)))) as [
        ServeProcess,
        ServeProcess,
      ];
      // A run on a: its first word arrives, then a dies with the run in flight.
      const lost = await execute(a, key, { payload: "lost", stream: true });
      const reader = (lost.body as ReadableStream<Uint8Array>).getReader();
      let text = "";
      while (!text.includes("text-delta")) text += new TextDecoder().decode((await reader.read()).value);
      const ids = (JSON.parse(text.slice(0, text.indexOf("\n\n")).replace(/^data: /, "")) as StreamEvent).data as { run_id: string; conversation_id: string };
      a.child.kill("SIGKILL");
      await new Promise((resolve) => a.child.once("exit", resolve));

      // b: the next run waits for the lapsed lease, takes the turn over and streams.
      const started = Date.now();
      const next = await execute(b, key, { payload: "next", stream: true, conversation_id: ids.conversation_id });
      expect(next.status).toBe(200);
      const nextReader = (next.body as ReadableStream<Uint8Array>).getReader();
      let nextText = "";
      while (!nextText.includes("text-delta")) nextText += new TextDecoder().decode((await nextReader.read()).value);
      expect(Date.now() - started).toBeLessThan(5000);
      await nextReader.cancel();

      const storage = openStorage(db);
      try {
        expect(await storage.findRun(ids.run_id)).toMatchObject({ status: "cancelled", error: expect.stringContaining("abandoned") });
        const messages = await storage.listRecentMessages(ids.conversation_id, 10);
        expect(messages.map((m) => m.turnIndex)).toEqual(messages.map((_, i) => i));
        expect(messages.filter((m) => m.role === "user").map((m) => m.content)).toEqual(["lost", "next"]);
      } finally {
        await storage.close();
      }
    } finally {
      await killAll();
      await drop();
    }
  }, 60_000);
}

describe("two channelkit serve processes on one SQLite file", () => {
  twoServers(() => sqliteDatabase("multi"));
});

describeWithPostgres("two channelkit serve processes on one Postgres database", (serverUrl) => {
  twoServers(() => postgresDatabase(serverUrl));
});

describe("a crash on SQLite", () => {
  takeOverAfterACrash(() => sqliteDatabase("crash"));
});

describeWithPostgres("a crash on Postgres", (serverUrl) => {
  takeOverAfterACrash(() => postgresDatabase(serverUrl));
});
