/**
 * A turn passed from one instance to another: two `channelkit serve` processes on one Postgres
 * database, each with a config that polls a conversation's queue at most once a minute
 * (`turnPollMaxMs`). A run on B waiting for a turn that a run on A holds starts as soon as
 * A's run is stored: the statement that stores it notifies B (`NOTIFY`), rather than B
 * finding out at its next look, seconds later.
 */
import { randomBytes } from "node:crypto";
import { openStorage } from "@channelkit/kysely";
import { describeWithPostgres, SseFrames } from "@channelkit/testkit";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ensureBuilt, killAll, makeApp, runCliJson, type ServeProcess, startServe, type TestApp } from "./test-process.js";
import { type CreatedChannel, execute, postgresDatabase, type RunDocument } from "./test-runs.js";

const ENV = { CHANNELKIT_SECRET_KEY: randomBytes(32).toString("hex") };
/**
 * How long the `hold` flow takes: A's run ends a little after B's look at 2,046 ms (2 + 4 + ...
 * + 1,024), so that B's next look would come about two seconds after it.
 */
const HOLD_MS = 2200;
/** B's longest wait between two looks at the queue: a run woken only by looking would start seconds late. */
const POLL_MAX_MS = 60_000;

const CONFIG = `import { defineFlow, text } from "@channelkit/core";

const hold = defineFlow({
  name: "hold",
  async *run(ctx) {
    await new Promise((done) => setTimeout(done, ${HOLD_MS}));
    yield text(\`held: \${ctx.payload}\`);
    return null;
  },
});

export default { flows: [hold], turnPollMaxMs: ${POLL_MAX_MS} };
`;

describeWithPostgres("a turn passed between instances", (serverUrl) => {
  let app: TestApp;
  let drop: (() => Promise<void>) | undefined;
  let db: string;
  let a: ServeProcess;
  let b: ServeProcess;
  let channel: CreatedChannel;

  beforeAll(async () => {
    await ensureBuilt();
    app = await makeApp({ "channelkit.config.mjs": CONFIG });
    ({ db, drop } = await postgresDatabase(serverUrl));
    const options = { cwd: app.path };
    const cli = <T>(...args: string[]) => runCliJson<T>([...args, "--db", db], ENV, options);
    const { tenant } = await cli<{ tenant: { id: string } }>("tenant", "create", "--name", "Turns");
    channel = await cli<CreatedChannel>("channel", "create", "--tenant", tenant.id, "--flow", "hold");
    const start = () => startServe(["--db", db, "--port", "0"], ENV, 15_000, options);
    [a, b] = await Promise.all([start(), start()]);
  }, 120_000);

  afterAll(async () => {
    await killAll();
    await drop?.();
    await app?.remove();
  });

  it("a run waiting on B starts once A's run of the conversation is stored, woken by A's notification", async () => {
    // A's run holds the turn; its conversation exists from data-run on.
    const first = await execute(a, channel.api_key, { payload: "first", stream: true });
    const frames = new SseFrames(first);
    const run = await frames.next();
    if (run?.type !== "data-run" || !run.data) throw new Error(`The first event is ${JSON.stringify(run)}`);
    const { conversation_id: conversationId, run_id: firstRunId } = run.data;
    // B's run takes the next ticket and waits: it looks at the queue after 2, 4, 8 ... ms.
    const second = execute(b, channel.api_key, { payload: "second", conversation_id: conversationId });
    await frames.rest();
    expect(frames.events.at(-1)?.type).toBe("finish");
    const answer = (await (await second).json()) as RunDocument & { output: { metadata: { started_at: string } } };
    expect(answer.status).toBe("success");
    expect(answer.output.messages).toEqual([{ role: "assistant", content: "held: second" }]);

    const storage = openStorage(db);
    try {
      const stored = await storage.findRun(firstRunId);
      if (!stored) throw new Error("A's run was not stored");
      // B's looks, by then seconds apart, would have started it up to seconds late.
      const late = Date.parse(answer.output.metadata.started_at) - Date.parse(stored.completedAt);
      expect(late).toBeGreaterThanOrEqual(0);
      expect(late, `B's run started ${late} ms after A's was stored`).toBeLessThan(750);
      const messages = await storage.listRecentMessages(conversationId, 10);
      expect(messages.map((m) => [m.turnIndex, m.role, m.content])).toEqual([
        [0, "user", "first"],
        [1, "assistant", "held: first"],
        [2, "user", "second"],
        [3, "assistant", "held: second"],
      ]);
    } finally {
      await storage.close();
    }
  }, 60_000);
});
