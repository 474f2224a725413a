import { randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ChannelService, createChannelService, type Logger } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { sqlite } from "@channelkit/kysely";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, serve } from "./serve.js";

/*
 * The SQLite form of a database that goes away: another process holds the file's write lock
 * (a backup, a migration, a stuck tool) longer than the busy timeout. Writes must fail in
 * the envelope within that timeout, reads go on (WAL), nothing is half-written, and the
 * service recovers by itself once the lock is released.
 */

const BUSY_TIMEOUT_MS = 300;
/** One busy timeout, plus slack for a loaded machine. */
const BOUND_MS = BUSY_TIMEOUT_MS + 1500;
const EXECUTE = "/public/v1/api/execute";

describe("SQLite faults: the file locked by another process", () => {
  const path = join(tmpdir(), `channelkit-faults-${randomUUID()}.db`);
  let service: ChannelService;
  let server: RunningServer;
  let key: string;
  const logged: unknown[][] = [];
  const logger: Logger = { warn() {}, error: (...args: unknown[]) => void logged.push(args) };

  beforeAll(async () => {
    const storage = sqlite(path, { busyTimeoutMs: BUSY_TIMEOUT_MS });
    await storage.migrate();
    service = await createChannelService({ storage, flows: demoFlows, secretKey: "5e".repeat(32), logger });
    server = await serve(service, { port: 0 });
    const { tenant } = await service.admin.createTenant({ name: "faults" });
    key = (await service.admin.createChannel({ tenantId: tenant.id, flow: "echo" })).api_key;
  });

  afterAll(async () => {
    await server?.close();
    await service?.close();
    await Promise.all(["", "-wal", "-shm"].map((suffix) => rm(`${path}${suffix}`, { force: true })));
  });

  function request(route: string, init: RequestInit = {}): Promise<Response> {
    return fetch(server.url + route, {
      ...init,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      signal: AbortSignal.timeout(BOUND_MS + 5000),
    });
  }

  const execute = (body: Record<string, unknown>) => request(EXECUTE, { method: "POST", body: JSON.stringify(body) });
  const history = async (id: string) => {
    const response = await request(`/public/v1/api/conversations/${id}/messages`);
    expect(response.status).toBe(200);
    return ((await response.json()) as { messages: { turn_index: number; content: string }[] }).messages;
  };

  it("execute (JSON and stream) answers 500 runtime_error within the busy timeout, history still answers, then the service resumes by itself", async () => {
    const opened = await execute({ payload: "before" });
    expect(opened.status).toBe(200);
    const id = ((await opened.json()) as { conversation_id: string }).conversation_id;

    const other = new Database(path);
    other.exec("BEGIN EXCLUSIVE");
    try {
      const before = logged.length;
      for (const body of [
        { payload: "json", conversation_id: id },
        { payload: "stream", conversation_id: id, stream: true },
        { payload: "new conversation" },
      ]) {
        const started = performance.now();
        const response = await execute(body);
        expect(response.status, JSON.stringify(body)).toBe(500);
        expect(response.headers.get("content-type")).toMatch(/^application\/json/);
        expect(await response.json()).toEqual({ error: { code: "runtime_error", message: expect.any(String) } });
        expect(performance.now() - started).toBeLessThan(BOUND_MS);
      }
      expect(logged.length).toBeGreaterThan(before);
      // Readers are not blocked by a writer in WAL mode.
      expect((await history(id)).map((m) => m.content)).toEqual(["before", "Echo: before"]);
    } finally {
      other.exec("ROLLBACK");
      other.close();
    }

    const back = await execute({ payload: "back", conversation_id: id });
    expect(back.status).toBe(200);
    expect(((await back.json()) as { status: string }).status).toBe("success");
    const messages = await history(id);
    expect(messages.map((m) => m.turn_index)).toEqual([0, 1, 2, 3]);
    expect(messages.map((m) => m.content)).toEqual(["before", "Echo: before", "back", "Echo: back"]);
  });
});
