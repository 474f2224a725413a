import { createHmac } from "node:crypto";
import { type ChannelService, createChannelService } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { postgres } from "@channelkit/kysely";
import { createTestDatabase, describeWithPostgres, type TestDatabase } from "@channelkit/testkit";
import pg from "pg";
import { afterAll, beforeAll, beforeEach, expect, it } from "vitest";
import { type RunningServer, serve } from "./serve.js";

/*
 * Round trips to Postgres per JSON execute of the echo flow, through `postgres()`, a real
 * service and a real HTTP server: every statement a pool client sends and waits for
 * (`BEGIN` and `COMMIT` included), counted on the pool the storage is given. See
 * docs/benchmarks.md ("Runs that take turns: what they cost") for why each is needed.
 */
describeWithPostgres("Postgres round trips per JSON execute", (serverUrl) => {
  const SECRET_KEY = "5e".repeat(32);
  const EXECUTE = "/public/v1/api/execute";

  let database: TestDatabase;
  let pool: pg.Pool;
  let service: ChannelService;
  let server: RunningServer;
  let plainKey: string;
  let signedKey: string;
  let signingSecret: string;
  /** The statements sent since the last reset, by their text. */
  const sent: string[] = [];

  beforeAll(async () => {
    database = await createTestDatabase(serverUrl);
    pool = new pg.Pool({ connectionString: database.url, max: 4 });
    // Every client of the pool counts its queries, whether sent by text or as a named prepared statement.
    pool.on("connect", (client) => {
      const query = client.query.bind(client) as (...args: unknown[]) => unknown;
      (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
        const first = args[0];
        sent.push(typeof first === "string" ? first : String((first as { text?: unknown }).text));
        return query(...args);
      };
    });
    const storage = postgres(pool);
    await storage.migrate();
    service = await createChannelService({ storage, flows: demoFlows, secretKey: SECRET_KEY, logger: { warn() {}, error() {} } });
    server = await serve(service, { port: 0 });
    const { tenant } = await service.admin.createTenant({ name: "round trips" });
    plainKey = (await service.admin.createChannel({ tenantId: tenant.id, flow: "echo" })).api_key;
    const signed = await service.admin.createChannel({ tenantId: tenant.id, flow: "echo", requireSignature: true });
    signedKey = signed.api_key;
    if (!signed.signing_secret) throw new Error("createChannel returned no signing secret");
    signingSecret = signed.signing_secret;
    // Each key read once, so that its channel's record is made: the tests below count a warm request's statements.
    for (const key of [plainKey, signedKey]) await history(key, "00000000-0000-4000-8000-000000000000");
  });

  /** `GET …/messages` of a conversation, with `key`. */
  function history(key: string, conversationId: string): Promise<Response> {
    return fetch(`${server.url}/public/v1/api/conversations/${conversationId}/messages`, { headers: { authorization: `Bearer ${key}` } });
  }

  afterAll(async () => {
    await server?.close();
    await service?.close();
    await pool?.end();
    await database?.drop();
  });

  beforeEach(() => {
    sent.length = 0;
  });

  /** One JSON execute; the statements it sent, from the request to its answer read whole. */
  async function execute(key: string, body: Record<string, unknown>, sign?: string): Promise<{ conversationId: string; statements: string[] }> {
    const raw = JSON.stringify({ stream: false, ...body });
    const headers: Record<string, string> = { authorization: `Bearer ${key}`, "content-type": "application/json" };
    if (sign) {
      const t = Math.floor(Date.now() / 1000);
      headers["x-service-signature"] = `t=${t},v1=${createHmac("sha256", sign).update(`${t}.${raw}`).digest("hex")}`;
    }
    sent.length = 0;
    const response = await fetch(server.url + EXECUTE, { method: "POST", headers, body: raw });
    const answer = (await response.json()) as { conversation_id: string; status: string; output: { message: string } };
    expect(response.status, JSON.stringify(answer)).toBe(200);
    expect(answer.status).toBe("success");
    // Nothing of the run is written after its answer: a statement sent late would show here.
    await new Promise((resolve) => setTimeout(resolve, 50));
    return { conversationId: answer.conversation_id, statements: sent.splice(0).map(label) };
  }

  /** A new conversation answered as JSON: nobody can know its id before the answer, so the run is stored whole at its end. */
  const NEW_CONVERSATION = ["select api_keys", "with: insert conversations, insert messages, insert runs"];
  /**
   * An existing conversation: the run's claim on its turn, which checks its tenant and
   * channel (no lookup before it), committed before the flow runs (runs take turns; its user
   * message is in history from its start), then its outcome (13 round trips before, with a
   * transaction for each).
   */
  const EXISTING_CONVERSATION = [
    "select api_keys",
    "with: update conversations, insert messages, insert runs",
    "with: update conversations, insert messages, update runs",
  ];

  it("(a) a new conversation: the key lookup and one statement for the whole run", async () => {
    const { statements } = await execute(plainKey, { payload: "hello" });
    expect(statements).toEqual(NEW_CONVERSATION);
  });

  it("(b) an existing conversation: the key lookup, the claim (which checks the conversation) and the outcome", async () => {
    const { conversationId } = await execute(plainKey, { payload: "hello" });
    const { statements } = await execute(plainKey, { payload: "again", conversation_id: conversationId });
    expect(statements).toEqual(EXISTING_CONVERSATION);
    // What they stored: contiguous turns, the user message before its reply.
    const response = await history(plainKey, conversationId);
    const { messages } = (await response.json()) as { messages: { role: string; content: string }[] };
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant", "user", "assistant"]);
    expect(messages[2]?.content).toBe("again");
  });

  it("a stream: its claim before its first event, then its outcome, one statement each", async () => {
    /** One streamed execute; the statements it sent, from the request to the end of its stream. */
    async function stream(body: Record<string, unknown>): Promise<{ conversationId: string; statements: string[] }> {
      sent.length = 0;
      const response = await fetch(server.url + EXECUTE, {
        method: "POST",
        headers: { authorization: `Bearer ${plainKey}`, "content-type": "application/json" },
        body: JSON.stringify({ stream: true, ...body }),
      });
      const text = await response.text();
      expect(text).toContain('"type":"finish"');
      await new Promise((resolve) => setTimeout(resolve, 50));
      const conversationId = (text.match(/"conversation_id":"([^"]+)"/) as RegExpMatchArray)[1] as string;
      return { conversationId, statements: sent.splice(0).map(label) };
    }
    const first = await stream({ payload: "hello" });
    expect(first.statements).toEqual([
      "select api_keys",
      "with: insert conversations, insert messages, insert runs",
      "with: update conversations, insert messages, update runs",
    ]);
    expect((await stream({ payload: "again", conversation_id: first.conversationId })).statements).toEqual(EXISTING_CONVERSATION);
  });

  it("the key lookup reads its channel's columns only when the channel's row is of a version not yet read: after its creation, and after any process changed it", async () => {
    const { tenant } = await service.admin.createTenant({ name: "versions" });
    const { api_key: key, channel } = await service.admin.createChannel({ tenantId: tenant.id, flow: "echo" });
    const statementsOf = async (answer: Promise<Response>) => {
      sent.length = 0;
      const response = await answer;
      await response.text();
      return { status: response.status, statements: sent.splice(0).map(label) };
    };
    const some = "00000000-0000-4000-8000-000000000001";
    expect(await statementsOf(history(key, some))).toEqual({ status: 404, statements: ["select api_keys", "select channels", "select conversations"] });
    expect(await statementsOf(history(key, some))).toEqual({ status: 404, statements: ["select api_keys", "select conversations"] });
    // Another process (a connection of its own) changes the channel: seen on the very next request.
    const other = new pg.Client({ connectionString: database.url });
    await other.connect();
    try {
      await other.query("UPDATE channels SET state = 'inactive' WHERE id = $1", [channel.id]);
      const inactive = await statementsOf(history(key, some));
      expect(inactive).toEqual({ status: 409, statements: ["select api_keys", "select channels"] });
      expect(await statementsOf(history(key, some))).toEqual({ status: 409, statements: ["select api_keys"] });
      // A write that changes no column is a new version all the same: read again, the same record.
      await other.query("UPDATE channels SET state = state WHERE id = $1", [channel.id]);
      expect(await statementsOf(history(key, some))).toEqual({ status: 409, statements: ["select api_keys", "select channels"] });
      await other.query("UPDATE channels SET state = 'active' WHERE id = $1", [channel.id]);
      expect(await statementsOf(history(key, some))).toEqual({ status: 404, statements: ["select api_keys", "select channels", "select conversations"] });
      // A change to the key itself needs no version: the key's columns are read every time.
      await other.query("UPDATE api_keys SET revoked_at = now()::text WHERE channel_id = $1", [channel.id]);
      expect(await statementsOf(history(key, some))).toMatchObject({ status: 401 });
    } finally {
      await other.end();
    }
  });

  it("(c) a signed channel adds none: the signature is checked in memory", async () => {
    const first = await execute(signedKey, { payload: "hello" }, signingSecret);
    expect(first.statements).toEqual(NEW_CONVERSATION);
    const { statements } = await execute(signedKey, { payload: "again", conversation_id: first.conversationId }, signingSecret);
    expect(statements).toEqual(EXISTING_CONVERSATION);
  });
});

/**
 * A statement by what it does: `begin`, `select api_keys`, or for one with data-modifying
 * `WITH` each write in order, e.g. `with: update conversations, insert messages, update runs`.
 */
function label(text: string): string {
  const plain = text.replace(/"/g, "").toLowerCase();
  const verb = plain.match(/^\s*(\w+)/)?.[1] ?? plain;
  if (verb === "with") {
    const writes = [...plain.matchAll(/\b(insert into|update) (\w+)/g)].map(([, what, table]) => `${what === "update" ? "update" : "insert"} ${table}`);
    return `with: ${writes.join(", ")}`;
  }
  if (verb === "select") return `select ${plain.match(/\bfrom (\w+)/)?.[1]}`;
  if (verb === "insert") return `insert ${plain.match(/^\s*insert into (\w+)/)?.[1]}`;
  if (verb === "update") return `update ${plain.match(/^\s*update (\w+)/)?.[1]}`;
  return verb;
}
