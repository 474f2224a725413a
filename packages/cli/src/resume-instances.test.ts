/**
 * Resumable streams across instances: two `channelkit serve` processes on one database (a
 * SQLite file, then a Postgres database), a channel made with `--resumable-streams`. A
 * stream started on A whose client left is resumed on B byte for byte, to its end; a cancel
 * sent to B stops a run on A; A killed with SIGKILL mid-run leaves B's readers an `error`
 * event within seconds and its run stored `cancelled`, never `running`.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { openStorage } from "@channelkit/kysely";
import { describeWithPostgres, SseFrames } from "@channelkit/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, killAll, runCliJson, type ServeProcess, startServe } from "./test-process.js";
import { type CreatedChannel, execute, type HistoryMessage, type StreamEvent, postgresDatabase, sqliteDatabase } from "./test-runs.js";

const ENV = { CHANNELKIT_SECRET_KEY: randomBytes(32).toString("hex") };
/** What the `slow` flow says, one text delta per word, 100 ms apart. */
const WORDS = Array.from({ length: 50 }, (_, i) => (i === 49 ? `word${i + 1}` : `word${i + 1} `));
const FIFTY_WORDS = WORDS.join("");
/** How long after the kill B's readers may wait for the stream's end, in ms (lease 1 s, sweep every third of it). */
const LOST_WITHIN_MS = 10_000;

function streamUrl(server: ServeProcess, conversationId: string): string {
  return `${server.url}/public/v1/api/conversations/${conversationId}/stream`;
}

function resumeOn(server: ServeProcess, key: string, conversationId: string): Promise<Response> {
  return fetch(streamUrl(server, conversationId), { headers: { Authorization: `Bearer ${key}` } });
}

function cancelOn(server: ServeProcess, key: string, conversationId: string): Promise<Response> {
  return fetch(`${server.url}/public/v1/api/conversations/${conversationId}/cancel`, { method: "POST", headers: { Authorization: `Bearer ${key}` } });
}

async function expectNothing(response: Response, where: string): Promise<void> {
  const body = await response.text();
  expect({ where, status: response.status, body }).toEqual({ where, status: 204, body: "" });
}

function expectStreamHeaders(response: Response): void {
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
  expect(response.headers.get("x-vercel-ai-ui-message-stream")).toBe("v1");
}

/** A streamed `slow` run on `server`, read up to `deltas` text deltas by a client that can leave. */
async function streamSlow(server: ServeProcess, key: string, deltas: number, conversationId?: string) {
  const controller = new AbortController();
  const body = { payload: `resume ${randomUUID()}`, stream: true, ...(conversationId ? { conversation_id: conversationId } : {}) };
  const response = await execute(server, key, body, {}, controller.signal);
  expectStreamHeaders(response);
  const frames = new SseFrames(response);
  const first = await frames.next();
  if (first?.type !== "data-run" || !first.data) throw new Error(`The first event is ${JSON.stringify(first)}, not data-run`);
  await frames.deltas(deltas);
  return { runId: first.data.run_id, conversationId: first.data.conversation_id, payload: body.payload, frames, leave: () => controller.abort() };
}

function resumeAcrossInstances(open: () => Promise<{ db: string; drop(): Promise<void> }>) {
  let db: string;
  let drop: (() => Promise<void>) | undefined;
  let key: string;
  let a: ServeProcess;
  let b: ServeProcess;
  const cli = <T = any>(...args: string[]) => runCliJson<T>([...args, "--db", db], ENV);

  /** The run as stored, once it is no longer `running` (or as it is after `timeoutMs`). */
  const storedRun = async (runId: string, timeoutMs = 5000) => {
    const storage = openStorage(db);
    try {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const run = await storage.findRun(runId);
        if ((run && run.status !== "running") || Date.now() > deadline) return run;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    } finally {
      await storage.close();
    }
  };

  const history = async (server: ServeProcess, conversationId: string) => {
    const response = await fetch(`${server.url}/public/v1/api/conversations/${conversationId}/messages`, { headers: { Authorization: `Bearer ${key}` } });
    expect(response.status).toBe(200);
    return ((await response.json()) as { messages: HistoryMessage[] }).messages;
  };

  beforeAll(async () => {
    await ensureBuilt();
    ({ db, drop } = await open());
    await cli("migrate");
    const tenantId = (await cli<{ tenant: { id: string } }>("tenant", "create", "--name", "Resume")).tenant.id;
    const [created, started] = await Promise.all([
      cli<CreatedChannel & { channel: { resumable_streams: boolean } }>("channel", "create", "--tenant", tenantId, "--flow", "slow", "--resumable-streams"),
      Promise.all([0, 1].map(() => startServe(["--db", db, "--port", "0", "--turn-lease-ms", "1000"], ENV))),
    ]);
    expect(created.channel.resumable_streams).toBe(true);
    key = created.api_key;
    [a, b] = started as [ServeProcess, ServeProcess];
  }, 120_000);

  afterAll(async () => {
    await killAll();
    await drop?.();
  });

  it("a stream started on A whose client left is resumed on B: A's bytes first, then every event once and in order, to finish; stored success; then 204 on both", async () => {
    const client = await streamSlow(a, key, 3);
    client.leave();
    const resumed = await resumeOn(b, key, client.conversationId);
    expectStreamHeaders(resumed);
    const follower = new SseFrames(resumed);
    await follower.rest();

    expect(follower.raw.startsWith(client.frames.raw), `${follower.raw.slice(0, 400)}\n…does not start with\n${client.frames.raw}`).toBe(true);
    expect(follower.events[0]).toEqual({ type: "data-run", data: { run_id: client.runId, conversation_id: client.conversationId } });
    expect(follower.events.map((event) => event.type)).toEqual(["data-run", "text-start", ...WORDS.map(() => "text-delta"), "text-end", "finish"]);
    expect(follower.events.flatMap((event) => (event.type === "text-delta" ? [event.delta] : []))).toEqual(WORDS);

    expect(await storedRun(client.runId)).toMatchObject({ status: "success", error: null });
    expect((await history(b, client.conversationId)).map((m) => [m.turn_index, m.role, m.content, m.run_id])).toEqual([
      [0, "user", client.payload, client.runId],
      [1, "assistant", FIFTY_WORDS, client.runId],
    ]);
    await expectNothing(await resumeOn(a, key, client.conversationId), "A after the end");
    await expectNothing(await resumeOn(b, key, client.conversationId), "B after the end");
  }, 20_000);

  it("a cancel sent to B stops a run on A: 200 cancelled once stored; A's client and a follower on B see the stream end; the partial reply in history; then 204", async () => {
    const client = await streamSlow(a, key, 3);
    const resumed = await resumeOn(b, key, client.conversationId);
    expectStreamHeaders(resumed);
    const follower = new SseFrames(resumed);
    await follower.deltas(3);

    const cancelled = await cancelOn(b, key, client.conversationId);
    const text = await cancelled.text();
    expect(cancelled.status, text).toBe(200);
    expect(JSON.parse(text)).toEqual({ run_id: client.runId, conversation_id: client.conversationId, status: "cancelled" });
    await Promise.all([client.frames.rest(), follower.rest()]);
    expect(follower.raw).toBe(client.frames.raw);
    expect(["finish", "error"]).toContain(client.frames.events.at(-1)?.type);
    const seen = client.frames.text();
    expect(FIFTY_WORDS.startsWith(seen) && seen.length < FIFTY_WORDS.length, seen).toBe(true);

    expect(await storedRun(client.runId, 1000)).toMatchObject({ status: "cancelled" });
    const messages = await history(a, client.conversationId);
    expect(messages.map((m) => [m.turn_index, m.role, m.run_id])).toEqual([
      [0, "user", client.runId],
      [1, "assistant", client.runId],
    ]);
    expect(messages[1]?.content.startsWith(seen.trimEnd()), messages[1]?.content).toBe(true);
    expect(FIFTY_WORDS.startsWith(messages[1]?.content ?? "?")).toBe(true);
    await expectNothing(await resumeOn(a, key, client.conversationId), "A after the cancel");
    await expectNothing(await resumeOn(b, key, client.conversationId), "B after the cancel");
    await expectNothing(await cancelOn(b, key, client.conversationId), "a second cancel");
  }, 20_000);

  it("A killed with SIGKILL mid-run: B's readers get an error event within seconds, the run is stored cancelled (abandoned), /stream answers 204, the conversation goes on on B", async () => {
    const client = await streamSlow(a, key, 3);
    client.leave();
    const before = new SseFrames(await resumeOn(b, key, client.conversationId));
    await before.deltas(5);

    a.child.kill("SIGKILL");
    const killedAt = Date.now();
    await a.exited;
    // Resumed after the kill, before the lease lapsed (A renewed it at most a third of a lease
    // ago): the recorded stream, then the end. A 204 is only right once the lease may have lapsed.
    const after = await resumeOn(b, key, client.conversationId);
    const late = after.status === 204 ? null : new SseFrames(after);
    if (late) expectStreamHeaders(after);
    else expect(Date.now() - killedAt, "204 before A's lease could lapse").toBeGreaterThan(600);
    await Promise.all([before.rest(), late?.rest()]);
    const lostAfterMs = Date.now() - killedAt;
    expect(lostAfterMs).toBeLessThan(LOST_WITHIN_MS);

    for (const reader of late ? [before, late] : [before]) {
      const last = reader.events.at(-1) as StreamEvent & { errorText?: string };
      expect(last.type).toBe("error");
      expect(last.errorText).toEqual(expect.any(String));
      expect(reader.events.filter((event) => event.type === "finish" || event.type === "error")).toHaveLength(1);
      // What A recorded, each word once and in order, then the end.
      const deltas = reader.events.flatMap((event) => (event.type === "text-delta" ? [event.delta] : []));
      expect(deltas).toEqual(WORDS.slice(0, deltas.length));
      expect(deltas.length).toBeLessThan(WORDS.length);
      expect(reader.raw.startsWith(client.frames.raw)).toBe(true);
    }
    if (late) expect(late.raw).toBe(before.raw);

    const stored = await storedRun(client.runId, 1000);
    expect(stored).toMatchObject({ status: "cancelled", error: expect.stringContaining("abandoned") });
    await expectNothing(await resumeOn(b, key, client.conversationId), "B after the loss");
    await expectNothing(await cancelOn(b, key, client.conversationId), "cancel after the loss");

    // The conversation is not left waiting for the dead instance: B runs its next turn.
    const next = await streamSlow(b, key, 1, client.conversationId);
    expect(next.conversationId).toBe(client.conversationId);
    const cancelled = await cancelOn(b, key, client.conversationId);
    expect(cancelled.status, await cancelled.clone().text()).toBe(200);
    await next.frames.rest();
    const turns = (await history(b, client.conversationId)).map((m) => m.turn_index);
    expect(turns).toEqual(turns.map((_, i) => i));
  }, 30_000);
}

describe("resumable streams across two servers on SQLite", () => {
  resumeAcrossInstances(() => sqliteDatabase("resume"));
});

describeWithPostgres("resumable streams across two servers on Postgres", (serverUrl) => {
  resumeAcrossInstances(() => postgresDatabase(serverUrl));
});
