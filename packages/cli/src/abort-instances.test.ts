/**
 * Clients that go away, many at once, on two `channelkit serve` processes sharing one
 * database: each leaves once its run has its ticket (its data-run event came), and each such
 * run is stored in its conversation's turn (`cancelled`, or `success` when it ended first),
 * the runs after it go on at once, and both processes stop at once on SIGTERM. The moments
 * before the ticket (the key lookup, the ticket itself) are held one at a time, in process,
 * by the contract suite's "clients that leave, at each point of their request".
 */
import { randomBytes } from "node:crypto";
import { describeWithPostgres } from "@channelkit/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, killAll, runCliJson, type ServeProcess, startServe } from "./test-process.js";
import { execute, postgresDatabase, type SharedDatabase, sqliteDatabase } from "./test-runs.js";

const ENV = { CHANNELKIT_SECRET_KEY: randomBytes(32).toString("hex") };
const BURST = 30;

function clientsGoingAway(open: () => Promise<SharedDatabase>) {
  let database: SharedDatabase;
  let a: ServeProcess;
  let b: ServeProcess;
  let key: string;

  beforeAll(async () => {
    await ensureBuilt();
    database = await open();
    const cli = <T>(...args: string[]) => runCliJson<T>([...args, "--db", database.db], ENV);
    await cli("migrate");
    const { tenant } = await cli<{ tenant: { id: string } }>("tenant", "create", "--name", "Leaving");
    ({ api_key: key } = await cli<{ api_key: string }>("channel", "create", "--tenant", tenant.id, "--flow", "echo"));
    [a, b] = await Promise.all([startServe(["--port", "0", "--db", database.db], ENV), startServe(["--port", "0", "--db", database.db], ENV)]);
  }, 60_000);

  afterAll(async () => {
    await killAll();
    await database?.drop();
  });

  it("runs of clients that left are stored in their turn; the conversation goes on, and SIGTERM stops both at once", async () => {
    const first = (await (await execute(a, key, { payload: "p0" })).json()) as { conversation_id: string };
    const conversationId = first.conversation_id;
    const leavers = new Set<string>();
    const sent = Array.from({ length: BURST }, async (_, i) => {
      const payload = `p${i + 1}`;
      const controller = new AbortController();
      const response = await execute(i % 2 ? b : a, key, { payload, conversation_id: conversationId, stream: true }, {}, controller.signal);
      const reader = (response.body as ReadableStream<Uint8Array>).getReader();
      // Every third client leaves once it has its run's data-run event: its ticket is taken,
      // and its run is queued, running or just ended. The others read their answer whole.
      const { value } = await reader.read();
      expect(new TextDecoder().decode(value)).toContain('"type":"data-run"');
      if (i % 3 === 2) {
        leavers.add(payload);
        controller.abort();
        return;
      }
      while (!(await reader.read()).done);
    });
    await Promise.all(sent);
    expect(leavers.size).toBe(BURST / 3);

    // The next run is not held up by a run that nobody drives any more (its lease is 30 s).
    const started = Date.now();
    const last = (await (await execute(b, key, { payload: "final", conversation_id: conversationId })).json()) as { status: string };
    expect(last.status).toBe("success");
    expect(Date.now() - started).toBeLessThan(5000);

    const history = (await (
      await fetch(`${a.url}/public/v1/api/conversations/${conversationId}/messages?limit=200`, { headers: { authorization: `Bearer ${key}` } })
    ).json()) as { messages: { turn_index: number; role: string; content: string }[] };
    const { messages } = history;
    expect(messages.map((m) => m.turn_index)).toEqual(messages.map((_, i) => i));
    // Every user message once, the leavers' too, and each answer right after its own question.
    const asked = messages.filter((m) => m.role === "user").map((m) => m.content);
    expect(asked.slice().sort()).toEqual(["final", ...Array.from({ length: BURST + 1 }, (_, i) => `p${i}`)].sort());
    messages.forEach((message, i) => {
      if (message.role === "assistant") expect(message.content).toBe(`Echo: ${messages[i - 1]?.content}`);
    });
    // A client that stayed has its answer.
    messages.forEach((message, i) => {
      if (message.role === "user" && !leavers.has(message.content)) expect(messages[i + 1]?.content).toBe(`Echo: ${message.content}`);
    });

    const signalled = Date.now();
    a.child.kill("SIGTERM");
    b.child.kill("SIGTERM");
    expect(await Promise.all([a.exited, b.exited])).toEqual([0, 0]);
    expect(Date.now() - signalled).toBeLessThan(5000);
  }, 60_000);
}

describe("clients going away on two channelkit serve processes on one SQLite file", () => {
  clientsGoingAway(() => sqliteDatabase("leaving"));
});

describeWithPostgres("clients going away on two channelkit serve processes on one Postgres database", (serverUrl) => {
  clientsGoingAway(() => postgresDatabase(serverUrl));
});
