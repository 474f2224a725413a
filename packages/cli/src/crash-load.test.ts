/**
 * A `channelkit serve` process killed with SIGKILL in the middle of a load of streamed and
 * JSON runs on one conversation, shared with a second process on the same database (a
 * SQLite file, then a Postgres database): the survivor serves every run sent to it, a
 * restarted process answers at once, and the history is exact: contiguous turns, every
 * answered run stored once and whole, no run left in flight, nothing half-written.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { openStorage } from "@channelkit/kysely";
import { describeWithPostgres } from "@channelkit/testkit";
import { describe, expect, it } from "vitest";
import { ensureBuilt, killAll, runCliJson, type ServeProcess, startServe } from "./test-process.js";
import { type CreatedChannel, type HistoryMessage, type Ran, run, postgresDatabase, sqliteDatabase } from "./test-runs.js";

const ENV = { CHANNELKIT_SECRET_KEY: randomBytes(32).toString("hex") };
const RUNS = 40;
/**
 * The kill comes when this few runs sent to the server to be killed have not answered yet:
 * each run left queued there costs the conversation one lease (1 s here) before the next
 * ticket's turn, so most runs answer first.
 */
const LEFT_ON_A = 3;

function crashUnderLoad(open: () => Promise<{ db: string; drop(): Promise<void> }>) {
  it("a server killed mid-load leaves no gap, duplicate or half-written turn; the survivor and a restart answer, history is exact", async () => {
    await ensureBuilt();
    const { db, drop } = await open();
    try {
      const cli = <T = any>(...args: string[]) => runCliJson<T>([...args, "--db", db], ENV);
      const tenantId = (await cli<{ tenant: { id: string } }>("tenant", "create", "--name", "Crash load")).tenant.id;
      const { api_key: key } = await cli<CreatedChannel>("channel", "create", "--tenant", tenantId, "--flow", "echo");
      const serveArgs = ["--db", db, "--port", "0", "--turn-lease-ms", "1000"];
      const [a, b] = (await Promise.all([0, 1].map(() => startServe(serveArgs, ENV)))) as [ServeProcess, ServeProcess];

      const opening = await run(b, key, { payload: "opening" });
      expect(opening).toMatchObject({ status: 200, outcome: "success" });
      const conversationId = opening.conversationId;

      // Runs alternate between the servers and, in pairs, between JSON and streams.
      const sent = Array.from({ length: RUNS }, (_, i) => ({
        onA: i % 2 === 0,
        body: { payload: `load ${i} ${randomUUID()}`, conversation_id: conversationId, stream: (i >> 1) % 2 === 1 },
      }));
      let pendingOnA = sent.filter(({ onA }) => onA).length;
      let killed = false;
      const killA = () => {
        if (killed) return;
        killed = true;
        a.child.kill("SIGKILL");
      };
      const results = sent.map(({ onA, body }) =>
        run(onA ? a : b, key, body)
          .catch((error: unknown): Ran => ({ status: 0, runId: "", conversationId: "", outcome: String(error), reply: "" }))
          .finally(() => {
            if (!onA || killed) return;
            pendingOnA -= 1;
            if (pendingOnA === LEFT_ON_A) killA();
          }),
      );
      const outcomes = await Promise.all(results);
      expect(killed).toBe(true);
      await a.exited;

      // Every run sent to the survivor is served whole, even those queued behind a run of the dead server.
      sent.forEach(({ onA, body }, i) => {
        if (!onA) expect(outcomes[i], `run ${i} on the survivor`).toMatchObject({ status: 200, outcome: "success", reply: `Echo: ${body.payload}` });
      });
      // How many of the killed server's last runs it answered before it died depends on timing: the history below must be exact either way.

      // A restart answers at once on the same conversation, and so does the survivor.
      const restarted = await startServe(serveArgs, ENV);
      const after = await Promise.all([
        run(restarted, key, { payload: "after restart", conversation_id: conversationId, stream: true }),
        run(b, key, { payload: "after on b", conversation_id: conversationId }),
      ]);
      for (const result of after) expect(result).toMatchObject({ status: 200, outcome: "success" });

      const response = await fetch(`${restarted.url}/public/v1/api/conversations/${conversationId}/messages?limit=200`, {
        headers: { Authorization: `Bearer ${key}` },
      });
      expect(response.status).toBe(200);
      const { messages } = (await response.json()) as { messages: HistoryMessage[] };
      expect(messages.map((m) => m.turn_index)).toEqual(messages.map((_, i) => i));

      // Each stored run: its user message, then its whole reply (or none, when it was lost in flight).
      const storage = openStorage(db);
      try {
        const byRun = new Map<string, HistoryMessage[]>();
        for (const message of messages) byRun.set(message.run_id as string, [...(byRun.get(message.run_id as string) ?? []), message]);
        const payloads: string[] = [];
        for (const [runId, own] of byRun) {
          const [user, ...replies] = own;
          expect(user, `run ${runId}`).toMatchObject({ role: "user" });
          const stored = await storage.findRun(runId);
          expect(stored?.status, `run ${runId}`).not.toBe("running");
          if (stored?.status === "success") expect(replies.map((m) => [m.role, m.content])).toEqual([["assistant", `Echo: ${user?.content}`]]);
          else expect(stored, `run ${runId}`).toMatchObject({ status: "cancelled", error: expect.stringContaining("abandoned") });
          if (stored?.status !== "success") expect(replies).toEqual([]);
          // A run's messages are contiguous: nothing of another run between them.
          expect(own.map((m) => m.turn_index)).toEqual(own.map((_, i) => (user?.turn_index ?? 0) + i));
          payloads.push(user?.content ?? "");
        }
        expect(new Set(payloads).size, "no user message stored twice").toBe(payloads.length);

        // Every run a client saw answered is in the history, once, as answered.
        const answered = outcomes.filter((o) => o.outcome === "success");
        for (const outcome of [opening, ...answered, ...after]) {
          expect(
            byRun.get(outcome.runId)?.map((m) => m.content),
            `run ${outcome.runId}`,
          ).toEqual([expect.any(String), outcome.reply]);
        }
        expect(payloads).toContain("after restart");
      } finally {
        await storage.close();
      }
    } finally {
      await killAll();
      await drop();
    }
  }, 90_000);
}

describe("a crash under load on SQLite", () => {
  crashUnderLoad(() => sqliteDatabase("crash-load"));
});

describeWithPostgres("a crash under load on Postgres", (serverUrl) => {
  crashUnderLoad(() => postgresDatabase(serverUrl));
});
