/**
 * `channelkit serve --streams-per-key/--streams-per-address/--max-connections`: the caps on
 * open streams and on connections reach the served service, and a malformed one is refused.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, killAll, runCli, runCliJson, startServe } from "./test-process.js";

const ENV = { CHANNELKIT_SECRET_KEY: randomBytes(32).toString("hex") };

describe("channelkit serve's caps on open streams", () => {
  const db = join(tmpdir(), `channelkit-caps-${randomUUID()}.db`);
  const cli = <T = any>(...args: string[]) => runCliJson<T>([...args, "--db", db], ENV);

  beforeAll(async () => {
    await ensureBuilt();
    await cli("migrate");
  }, 120_000);

  afterAll(async () => {
    await killAll();
    await Promise.all(["", "-wal", "-shm"].map((suffix) => rm(`${db}${suffix}`, { force: true })));
  });

  it("--streams-per-key 1: a key's second subscription is 429 too_many_streams with Retry-After", async () => {
    const tenantId = (await cli<{ tenant: { id: string } }>("tenant", "create", "--name", "Caps")).tenant.id;
    const { api_key: key } = await cli<{ api_key: string }>("channel", "create", "--tenant", tenantId, "--flow", "echo");
    const server = await startServe(["--db", db, "--port", "0", "--streams-per-key", "1", "--streams-per-address", "off", "--max-connections", "50"], ENV);
    const headers = { authorization: `Bearer ${key}` };
    const run = await fetch(`${server.url}/public/v1/api/execute`, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json" },
      body: JSON.stringify({ payload: "hi", stream: false }),
    });
    const { conversation_id: id } = (await run.json()) as { conversation_id: string };
    const events = `${server.url}/public/v1/api/conversations/${id}/events`;
    const leaving = new AbortController();
    const first = await fetch(events, { headers, signal: leaving.signal });
    expect(first.status).toBe(200);
    const second = await fetch(events, { headers });
    expect(second.status).toBe(429);
    expect(second.headers.get("retry-after")).toBe("5");
    expect(((await second.json()) as { error: { code: string } }).error.code).toBe("too_many_streams");
    leaving.abort();
  }, 60_000);

  it("a malformed cap is refused with what it takes", async () => {
    const zero = await runCli(["serve", "--db", db, "--port", "0", "--max-connections", "0"], ENV);
    expect(zero.code).toBe(2);
    expect(zero.stderr).toContain("--max-connections takes a whole number from 1 to 999999999, or off for no cap");
    const word = await runCli(["serve", "--db", db, "--port", "0", "--streams-per-key", "many"], ENV);
    expect(word.code).toBe(2);
    expect(word.stderr).toContain("--streams-per-key takes a whole number");
  }, 60_000);
});
