/**
 * Clients that go away, many at once, on two `channelkit serve` processes sharing one
 * database: each run whose client left is stored `cancelled` in its conversation's turn, the
 * runs after it go on at once, and both processes stop at once on SIGTERM.
 *
 * Before, a streamed execute whose client left before the answer's head was written (the
 * run was being started, and Postgres is slow enough for that) was never cancelled by the
 * Node adapter: nobody pulled its run, which kept its ticket, so every later run of the
 * conversation waited for the lease to lapse, and SIGTERM waited for that run until
 * `shutdown_timeout`.
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

  it("runs of clients that left are stored cancelled in their turn; the conversation goes on, and SIGTERM stops both at once", async () => {
    const first = (await (await execute(a, key, { payload: "p0" })).json()) as { conversation_id: string };
    const conversationId = first.conversation_id;
    const sent = Array.from({ length: BURST }, (_, i) => {
      const controller = new AbortController();
      // Every third client leaves 30 ms after sending: before its answer, or during it.
      if (i % 3 === 2) setTimeout(() => controller.abort(), 30);
      return execute(i % 2 ? b : a, key, { payload: `p${i + 1}`, conversation_id: conversationId, stream: true }, {}, controller.signal)
        .then((response) => response.text())
        .then(
          () => "read",
          () => "left",
        );
    });
    const outcomes = await Promise.all(sent);
    expect(outcomes.filter((outcome) => outcome === "left").length).toBeGreaterThan(0);

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
    // Every user message once, and each answer right after its own question.
    const asked = messages.filter((m) => m.role === "user").map((m) => m.content);
    expect(asked.slice().sort()).toEqual(["final", ...Array.from({ length: BURST + 1 }, (_, i) => `p${i}`)].sort());
    messages.forEach((message, i) => {
      if (message.role === "assistant") expect(message.content).toBe(`Echo: ${messages[i - 1]?.content}`);
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
