/**
 * A `channelkit serve` process killed with SIGKILL while it held a conversation's turn and
 * had three more runs of it waiting their turn: a surviving process's next run takes the turn
 * over within one lease of the death, however many of the dead process's runs were queued
 * (they are passed over at once, not each after a claim time of its own). With three
 * processes, a live process's run queued between the dead one's is answered too, whole.
 */
import { randomBytes } from "node:crypto";
import { describeWithPostgres } from "@channelkit/testkit";
import { describe, expect, it } from "vitest";
import { openStorage } from "./storage.js";
import { ensureBuilt, killAll, runCliJson, type ServeProcess, startServe } from "./test-process.js";
import { execute, postgresDatabase, type SharedDatabase, sqliteDatabase } from "./test-runs.js";

const ENV = { CHANNELKIT_SECRET_KEY: randomBytes(32).toString("hex") };
/** The turn lease of the test's processes: each lost waiter used to cost this much again. */
const LEASE_MS = 4000;
/** What a takeover may take beyond the lease on a loaded machine (polls, a claim, process start-up of the stream). */
const SLACK_MS = 4000;

/** A streamed execute, read up to its data-run event (its ticket is taken) or its first word. */
async function streamUntil(server: ServeProcess, key: string, body: Record<string, unknown>, first: "data-run" | "text-delta") {
  const response = await execute(server, key, { ...body, stream: true });
  expect(response.status).toBe(200);
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let text = "";
  /** Reads on until an event of `type`, or the stream's end. */
  const until = async (type: string) => {
    while (!text.includes(`"type":"${type}"`)) {
      const { done, value } = await reader.read();
      if (done) throw new Error(`the stream ended before ${type}: ${text}`);
      text += decoder.decode(value, { stream: true });
    }
  };
  await until(first);
  const ids = (JSON.parse(text.slice(0, text.indexOf("\n\n")).replace(/^data: /, "")) as { data: { run_id: string; conversation_id: string } }).data;
  /** The rest of the stream, once it ends: its last event's type. */
  const rest = async () => {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    const frames = text.trim().split("\n\n");
    return (JSON.parse((frames.at(-1) as string).replace(/^data: /, "")) as { type: string }).type;
  };
  return { ids, until, rest, cancel: () => reader.cancel() };
}

function crashWithWaiters(processes: 2 | 3, open: () => Promise<SharedDatabase>) {
  it(`${processes} processes: the survivor's next run takes over within a lease of the SIGKILL, past the dead process's three waiting runs`, async () => {
    await ensureBuilt();
    const database = await open();
    try {
      const cli = <T>(...args: string[]) => runCliJson<T>([...args, "--db", database.db], ENV);
      await cli("migrate");
      const { tenant } = await cli<{ tenant: { id: string } }>("tenant", "create", "--name", "Crash");
      const { api_key: key } = await cli<{ api_key: string }>("channel", "create", "--tenant", tenant.id, "--flow", "slow");
      const servers = await Promise.all(
        Array.from({ length: processes }, () => startServe(["--db", database.db, "--port", "0", "--turn-lease-ms", String(LEASE_MS)], ENV)),
      );
      const [dying, survivor, third] = servers as [ServeProcess, ServeProcess, ServeProcess | undefined];

      // The dying process holds the turn (its run is streaming words) and has three runs
      // queued behind it; with three processes, a live process's run is queued after them.
      const holder = await streamUntil(dying, key, { payload: "held" }, "text-delta");
      const conversationId = holder.ids.conversation_id;
      const waiting = [];
      for (const payload of ["lost 1", "lost 2", "lost 3"])
        waiting.push(await streamUntil(dying, key, { payload, conversation_id: conversationId }, "data-run"));
      const live = third ? await streamUntil(third, key, { payload: "live", conversation_id: conversationId }, "data-run") : null;

      dying.child.kill("SIGKILL");
      await dying.exited;
      const killed = Date.now();
      const next = await streamUntil(survivor, key, { payload: "next", conversation_id: conversationId }, "data-run");
      // The conversation answers again (the first word of either live run) within a lease of
      // the death: the dead process's waiting runs cost nothing more.
      const answering = [next.until("text-delta"), ...(live ? [live.until("text-delta")] : [])];
      await Promise.race(answering);
      expect(Date.now() - killed).toBeLessThan(LEASE_MS + SLACK_MS);
      // Both live runs are answered, whichever took the turn over first (the other queued
      // again behind it when its ticket was passed over, or waited its turn).
      await Promise.all(answering);
      expect(await next.rest()).toBe("finish");
      if (live) expect(await live.rest()).toBe("finish");

      const storage = await openStorage(database.db);
      try {
        expect(await storage.findRun(holder.ids.run_id)).toMatchObject({ status: "cancelled", error: expect.stringContaining("abandoned") });
        const messages = await storage.listRecentMessages(conversationId, 200);
        expect(messages.map((m) => m.turnIndex)).toEqual(messages.map((_, i) => i));
        const asked = messages.filter((m) => m.role === "user").map((m) => m.content);
        // The dead process's waiting runs were in its memory only: their clients lost their
        // connection, and nothing of them is stored (docs/reliability.md).
        expect(asked.slice().sort()).toEqual(["held", "next", ...(third ? ["live"] : [])].sort());
        for (const lost of waiting) expect(await storage.findRun(lost.ids.run_id)).toBeNull();
        for (const run of [next, ...(live ? [live] : [])]) expect(await storage.findRun(run.ids.run_id)).toMatchObject({ status: "success" });
      } finally {
        await storage.close();
      }
    } finally {
      await killAll();
      await database.drop();
    }
  }, 60_000);
}

describe("a crash with runs waiting, on SQLite", () => {
  crashWithWaiters(2, () => sqliteDatabase("crash-waiters"));
  crashWithWaiters(3, () => sqliteDatabase("crash-waiters"));
});

describeWithPostgres("a crash with runs waiting, on Postgres", (serverUrl) => {
  crashWithWaiters(2, () => postgresDatabase(serverUrl));
  crashWithWaiters(3, () => postgresDatabase(serverUrl));
});
