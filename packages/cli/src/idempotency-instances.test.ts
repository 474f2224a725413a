/**
 * Idempotent requests across instances: two `channelkit serve` processes on one database (a
 * SQLite file, then a Postgres database). The same `Idempotency-Key` and body sent to both at
 * once runs the flow once: one answers the run, the other `409 idempotency_key_in_use` (or the
 * first answer, replayed, when the run had already ended); sent again to either afterwards,
 * the first answer byte for byte. A key whose instance was killed mid-run is free again once
 * its lease lapses, and the other instance then runs it.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { describeWithPostgres } from "@channelkit/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, killAll, runCliJson, type ServeProcess, startServe } from "./test-process.js";
import { type CreatedChannel, type HistoryMessage, postgresDatabase, sqliteDatabase } from "./test-runs.js";

const ENV = { CHANNELKIT_SECRET_KEY: randomBytes(32).toString("hex") };

/** `POST` execute on `server` with an `Idempotency-Key`. */
function send(server: ServeProcess, apiKey: string, body: Record<string, unknown>, idempotencyKey: string, signal?: AbortSignal): Promise<Response> {
  const init: RequestInit = {
    method: "POST",
    headers: { Authorization: `Bearer ${apiKey}`, "Content-Type": "application/json", "Idempotency-Key": idempotencyKey },
    body: JSON.stringify(body),
  };
  if (signal) init.signal = signal;
  return fetch(`${server.url}/public/v1/api/execute`, init);
}

/** An answer read whole. */
async function read(response: Response): Promise<{ status: number; text: string; replayed: string | null; code: string | null }> {
  const text = await response.text();
  const code = response.status >= 400 ? ((JSON.parse(text) as { error?: { code?: string } }).error?.code ?? null) : null;
  return { status: response.status, text, replayed: response.headers.get("idempotent-replayed"), code };
}

function idempotentAcrossInstances(open: () => Promise<{ db: string; drop(): Promise<void> }>) {
  let db: string;
  let drop: (() => Promise<void>) | undefined;
  let echoKey: string;
  let slowKey: string;
  let a: ServeProcess;
  let b: ServeProcess;
  const cli = <T = any>(...args: string[]) => runCliJson<T>([...args, "--db", db], ENV);

  const history = async (server: ServeProcess, apiKey: string, conversationId: string) => {
    const response = await fetch(`${server.url}/public/v1/api/conversations/${conversationId}/messages?limit=200`, {
      headers: { Authorization: `Bearer ${apiKey}` },
    });
    expect(response.status).toBe(200);
    return ((await response.json()) as { messages: HistoryMessage[] }).messages;
  };

  beforeAll(async () => {
    await ensureBuilt();
    ({ db, drop } = await open());
    await cli("migrate");
    const tenantId = (await cli<{ tenant: { id: string } }>("tenant", "create", "--name", "Idempotency")).tenant.id;
    const [echo, slow, started] = await Promise.all([
      cli<CreatedChannel>("channel", "create", "--tenant", tenantId, "--flow", "echo"),
      cli<CreatedChannel>("channel", "create", "--tenant", tenantId, "--flow", "slow"),
      Promise.all([0, 1].map(() => startServe(["--db", db, "--port", "0", "--turn-lease-ms", "1000"], ENV))),
    ]);
    echoKey = echo.api_key;
    slowKey = slow.api_key;
    [a, b] = started as [ServeProcess, ServeProcess];
  }, 120_000);

  afterAll(async () => {
    await killAll();
    await drop?.();
  });

  it("the same key and body sent to A and B at once, 20 times over: each runs the flow once, and either instance answers it again byte for byte", async () => {
    const opening = await read(await send(a, echoKey, { payload: "opening", stream: false }, `open-${randomUUID()}`));
    expect(opening.status, opening.text).toBe(200);
    const conversationId = (JSON.parse(opening.text) as { conversation_id: string }).conversation_id;

    const ROUNDS = 20;
    const answers = await Promise.all(
      Array.from({ length: ROUNDS }, async (_, i) => {
        const key = `race-${i}-${randomUUID()}`;
        const body = { payload: `message ${i}`, conversation_id: conversationId, stream: false };
        const both = await Promise.all([a, b].map(async (server) => read(await send(server, echoKey, body, key))));
        const ran = both.filter((answer) => answer.status === 200 && answer.replayed === null);
        // One ran the flow; the other found the key in use, or (the run already over) its answer.
        expect(ran, JSON.stringify(both)).toHaveLength(1);
        for (const other of both.filter((answer) => answer !== ran[0])) {
          if (other.status === 200) expect(other).toMatchObject({ replayed: "true", text: ran[0]?.text });
          else expect([other.status, other.code]).toEqual([409, "idempotency_key_in_use"]);
        }
        return { key, body, text: ran[0]?.text as string };
      }),
    );

    const messages = await history(b, echoKey, conversationId);
    const users = messages.filter((message) => message.role === "user").map((message) => message.content);
    expect(users.sort()).toEqual(["opening", ...Array.from({ length: ROUNDS }, (_, i) => `message ${i}`)].sort());
    expect(messages.map((message) => message.turn_index)).toEqual(messages.map((_, i) => i));
    // Each run's turn counter saw every run before it once: 2..ROUNDS+1, each once.
    const turns = answers.map(({ text }) => (JSON.parse(text) as { output: { result: { turn: number } } }).output.result.turn);
    expect(turns.sort((x, y) => x - y)).toEqual(Array.from({ length: ROUNDS }, (_, i) => i + 2));

    for (const { key, body, text } of answers) {
      for (const server of [a, b]) expect(await read(await send(server, echoKey, body, key))).toMatchObject({ status: 200, replayed: "true", text });
      const reused = await read(await send(a, echoKey, { ...body, payload: "another body" }, key));
      expect([reused.status, reused.code]).toEqual([422, "idempotency_key_reused"]);
    }
  }, 60_000);

  it("a stream running on A: the same key on B is 409 idempotency_key_in_use with Retry-After; once it ended, B replays A's bytes", async () => {
    const key = `stream-${randomUUID()}`;
    const body = { payload: `story ${randomUUID()}`, stream: true };
    const first = await send(a, slowKey, body, key);
    expect(first.status).toBe(200);
    const reader = first.body?.pipeThrough(new TextDecoderStream()).getReader();
    let raw = "";
    // Its first event is out: its key is held.
    while (!raw.includes("\n\n")) raw += (await reader?.read())?.value ?? "";
    const onB = await send(b, slowKey, body, key);
    expect(onB.headers.get("retry-after")).toBe("1");
    expect(await read(onB)).toMatchObject({ status: 409, code: "idempotency_key_in_use" });
    for (;;) {
      const chunk = await reader?.read();
      if (!chunk || chunk.done) break;
      raw += chunk.value;
    }
    expect(raw).toContain('"type":"finish"');
    const replay = await read(await send(b, slowKey, body, key));
    expect(replay).toMatchObject({ status: 200, replayed: "true" });
    expect(replay.text).toBe(raw);
  }, 30_000);

  it("a key whose instance was killed mid-run is in use until its lease lapses, then the other instance runs it", async () => {
    const key = `killed-${randomUUID()}`;
    const body = { payload: `lost ${randomUUID()}`, stream: true };
    const first = await send(a, slowKey, body, key);
    const reader = first.body?.getReader();
    await reader?.read();
    a.child.kill("SIGKILL");
    await a.exited;
    const inUse = await read(await send(b, slowKey, body, key));
    expect([inUse.status, inUse.code]).toEqual([409, "idempotency_key_in_use"]);
    // The lease is a second (--turn-lease-ms 1000): the key is free again within it.
    const started = Date.now();
    let taken: Response | undefined;
    while (Date.now() - started < 10_000) {
      const response = await send(b, slowKey, body, key);
      if (response.status !== 409) {
        taken = response;
        break;
      }
      await response.body?.cancel();
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(taken?.status).toBe(200);
    expect(taken?.headers.get("idempotent-replayed")).toBeNull();
    expect(Date.now() - started).toBeLessThan(5000);
    await taken?.body?.cancel();
  }, 30_000);
}

describe("idempotent requests across two servers on SQLite", () => {
  idempotentAcrossInstances(() => sqliteDatabase("idempotency"));
});

describeWithPostgres("idempotent requests across two servers on Postgres", (serverUrl) => {
  idempotentAcrossInstances(() => postgresDatabase(serverUrl));
});
