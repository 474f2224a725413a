/**
 * Live chat across two `channelkit serve` processes on one database (a SQLite file, then a
 * Postgres database): the user talks to instance A and follows its subscription there, the
 * agent works through instance B; what one does reaches the other within a second, modes
 * never move twice, and turn indexes stay contiguous when both sides write at once.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createTestDatabase, describeWithPostgres } from "@channelkit/testkit";
import { EventSourceParserStream } from "eventsource-parser/stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, killAll, runCliJson, type ServeProcess, startServe } from "./test-process.js";

const ENV = { CHANNELKIT_SECRET_KEY: randomBytes(32).toString("hex"), CHANNELKIT_ADMIN_JWT_SECRET: randomBytes(32).toString("hex") };

/** The events of an SSE response, each within a deadline. */
function events(response: Response) {
  if (!response.body) throw new Error("no body");
  const reader = response.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
  return {
    async next(ms = 3000): Promise<any> {
      let timer: ReturnType<typeof setTimeout> | undefined;
      try {
        const { done, value } = await Promise.race([
          reader.read(),
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error(`no event within ${ms} ms`)), ms);
          }),
        ]);
        if (done) throw new Error("the stream ended");
        return JSON.parse(value.data);
      } finally {
        clearTimeout(timer);
      }
    },
    close: () => reader.cancel().catch(() => undefined),
  };
}

function liveChatAcrossInstances(open: () => Promise<{ db: string; drop(): Promise<void> }>) {
  let db: string;
  let drop: () => Promise<void>;
  let a: ServeProcess;
  let b: ServeProcess;
  let tenantId: string;
  let key: string;
  let token: string;
  const cli = <T = any>(...args: string[]) => runCliJson<T>([...args, "--db", db], ENV);

  beforeAll(async () => {
    await ensureBuilt();
    ({ db, drop } = await open());
    await cli("migrate");
    tenantId = (await cli<{ tenant: { id: string } }>("tenant", "create", "--name", "Desk")).tenant.id;
    key = (await cli<{ api_key: string }>("channel", "create", "--tenant", tenantId, "--flow", "handover")).api_key;
    token = (await runCliJson<{ token: string }>(["admin-token", "--tenant", tenantId], ENV)).token;
    [a, b] = await Promise.all([startServe(["--port", "0", "--db", db], ENV), startServe(["--port", "0", "--db", db], ENV)]);
  }, 60_000);

  afterAll(async () => {
    await killAll();
    await drop?.();
  });

  const execute = (server: ServeProcess, body: Record<string, unknown>) =>
    fetch(`${server.url}/public/v1/api/execute`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ stream: false, ...body }),
    }).then((response) => response.json() as Promise<any>);
  const inbox = (server: ServeProcess, path: string, body?: unknown) =>
    fetch(`${server.url}/api/v1/livechat${path}`, {
      method: body === undefined && !path.endsWith("/accept") && !path.endsWith("/close") ? "GET" : "POST",
      headers: { authorization: `Bearer ${token}`, "x-tenant-id": tenantId, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const subscribe = async (server: ServeProcess, conversationId: string) =>
    events(await fetch(`${server.url}/public/v1/api/conversations/${conversationId}/events`, { headers: { authorization: `Bearer ${key}` } }));

  it("the agent answers through B, the user's subscription on A sees it within a second; the user's message through A reaches B's agents", async () => {
    const handover = await execute(a, { payload: "I need a human" });
    expect(handover.output.metadata.livechat_mode).toBe("livechat_waiting");
    const id = handover.conversation_id as string;
    const user = await subscribe(a, id);
    const agents = events(await fetch(`${b.url}/api/v1/livechat/feed`, { headers: { authorization: `Bearer ${token}`, "x-tenant-id": tenantId } }));
    try {
      expect(await user.next()).toMatchObject({ type: "mode", mode: "livechat_waiting" });
      expect(await agents.next()).toEqual({ type: "ready" });

      expect((await inbox(b, `/conversations/${id}/accept`)).status).toBe(200);
      expect(await user.next()).toMatchObject({ type: "mode", mode: "livechat_active" });
      expect(await agents.next()).toMatchObject({ type: "mode", conversation: { conversation_id: id, mode: "livechat_active" } });

      expect((await inbox(b, `/conversations/${id}/messages`, { content: "Hello, I am Ann" })).status).toBe(200);
      const sent = Date.now();
      expect(await user.next()).toMatchObject({ type: "message", message: { content: "Hello, I am Ann", sender: "agent", turn_index: 2 } });
      // Stored on B, seen by the user's subscription on A within a second.
      expect(Date.now() - sent).toBeLessThan(1000);
      expect(await agents.next()).toMatchObject({ type: "message", message: { content: "Hello, I am Ann" } });

      expect((await execute(a, { payload: "My parcel is late", conversation_id: id })).output.metadata.livechat_mode).toBe("livechat_active");
      expect(await agents.next()).toMatchObject({
        type: "message",
        conversation_id: id,
        message: { content: "My parcel is late", sender: "user", turn_index: 3 },
      });
      expect(await user.next()).toMatchObject({ type: "message", message: { sender: "user", turn_index: 3 } });

      expect((await inbox(b, `/conversations/${id}/close`)).status).toBe(200);
      expect(await user.next()).toMatchObject({ type: "mode", mode: "livechat_closed" });
    } finally {
      await user.close();
      await agents.close();
    }
  });

  it("two agents accepting one conversation on two instances at once: one wins, the other is told", async () => {
    const id = (await execute(a, { payload: "help" })).conversation_id as string;
    const statuses = (await Promise.all([inbox(a, `/conversations/${id}/accept`), inbox(b, `/conversations/${id}/accept`)])).map((r) => r.status);
    expect(statuses.sort()).toEqual([200, 409]);
  });

  it("a wait that expired on A's clock is handed over again through B, and A's agent can accept the new wait", async () => {
    const created = await cli<{ channel: { id: string }; api_key: string }>("channel", "create", "--tenant", tenantId, "--flow", "handover");
    await cli("channel", "update", created.channel.id, "--livechat", '{"wait_timeout_seconds":2}');
    const run = (server: ServeProcess, body: Record<string, unknown>) =>
      fetch(`${server.url}/public/v1/api/execute`, {
        method: "POST",
        headers: { authorization: `Bearer ${created.api_key}`, "content-type": "application/json" },
        body: JSON.stringify({ stream: false, ...body }),
      }).then((response) => response.json() as Promise<any>);
    const mode = async (server: ServeProcess, id: string) =>
      (
        (await (
          await fetch(`${server.url}/public/v1/api/conversations/${id}/messages`, { headers: { authorization: `Bearer ${created.api_key}` } })
        ).json()) as { mode: string }
      ).mode;
    const id = (await run(a, { payload: "help" })).conversation_id as string;
    // Two seconds, not one: the new wait must outlast the accept below on a loaded machine.
    await new Promise((resolve) => setTimeout(resolve, 2100));
    expect(await mode(a, id)).toBe("livechat_expired");
    const again = await run(b, { payload: "still there?", conversation_id: id });
    expect(again.output.metadata.livechat_mode).toBe("livechat_waiting");
    expect(await mode(a, id)).toBe("livechat_waiting");
    expect((await inbox(a, `/conversations/${id}/accept`)).status).toBe(200);
    expect(await mode(b, id)).toBe("livechat_active");
  });

  it("agent messages through B racing user messages through A keep contiguous turn indexes, nothing lost", async () => {
    const id = (await execute(a, { payload: "help" })).conversation_id as string;
    expect((await inbox(b, `/conversations/${id}/accept`)).status).toBe(200);
    const writes = Array.from({ length: 8 }, (_, i) => [
      inbox(b, `/conversations/${id}/messages`, { content: `agent ${i}` }).then((r) => r.status),
      execute(a, { payload: `user ${i}`, conversation_id: id }).then((run) => (run.status === "pending" ? 200 : run.status)),
    ]).flat();
    expect(new Set(await Promise.all(writes))).toEqual(new Set([200]));
    const history = (await (
      await fetch(`${a.url}/public/v1/api/conversations/${id}/messages?limit=200`, { headers: { authorization: `Bearer ${key}` } })
    ).json()) as { messages: { turn_index: number; sender: string | null }[] };
    expect(history.messages.map((m) => m.turn_index)).toEqual(Array.from({ length: 18 }, (_, i) => i));
    expect(history.messages.filter((m) => m.sender === "agent")).toHaveLength(8);
    expect(history.messages.filter((m) => m.sender === "user")).toHaveLength(8);
  });
}

describe("live chat across two channelkit serve processes on one SQLite file", () => {
  liveChatAcrossInstances(async () => {
    const db = join(tmpdir(), `channelkit-livechat-${randomUUID()}.db`);
    return { db, drop: () => Promise.all(["", "-wal", "-shm"].map((suffix) => rm(`${db}${suffix}`, { force: true }))).then(() => undefined) };
  });
});

describeWithPostgres("live chat across two channelkit serve processes on one Postgres database", (serverUrl) => {
  liveChatAcrossInstances(async () => {
    const database = await createTestDatabase(serverUrl);
    return { db: database.url, drop: () => database.drop() };
  });
});
