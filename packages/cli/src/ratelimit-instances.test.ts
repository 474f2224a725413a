/**
 * Rate limits across instances: two `channelkit serve` processes on one database (a SQLite
 * file, then Postgres) count together, so a client spreading its requests over both gets
 * exactly the limit; the command sets a channel's limits and the service's, or turns them off.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createTestDatabase, describeWithPostgres } from "@channelkit/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, killAll, runCli, runCliJson, type ServeProcess, startServe } from "./test-process.js";

const ENV = { CHANNELKIT_SECRET_KEY: randomBytes(32).toString("hex"), CHANNELKIT_ADMIN_JWT_SECRET: randomBytes(32).toString("hex") };
const APP = "https://limits.example";

interface CreatedChannel {
  channel: { id: string; rate_limits: Record<string, unknown> };
  api_key: string;
}

function execute(server: ServeProcess, key: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${server.url}/public/v1/api/execute`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", origin: APP, ...headers },
    body: JSON.stringify({ payload: "hi", stream: false }),
  });
}

/** The statuses of `count` requests sent at once, alternating between the servers, counted by status and error code. */
async function tally(servers: ServeProcess[], count: number, send: (server: ServeProcess) => Promise<Response>): Promise<Record<string, number>> {
  const answers = await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const response = await send(servers[i % servers.length] as ServeProcess);
      const body = (await response.json()) as { error?: { code: string } };
      return `${response.status}${body.error ? ` ${body.error.code}` : ""}`;
    }),
  );
  const counts: Record<string, number> = {};
  for (const answer of answers) counts[answer] = (counts[answer] ?? 0) + 1;
  return counts;
}

function limitsAcrossInstances(open: () => Promise<{ db: string; drop(): Promise<void> }>) {
  let db: string;
  let drop: (() => Promise<void>) | undefined;
  let servers: ServeProcess[] = [];
  let tenantId: string;
  const cli = <T = any>(...args: string[]) => runCliJson<T>([...args, "--db", db], ENV);
  const publicChannel = () => cli<CreatedChannel>("channel", "create", "--tenant", tenantId, "--flow", "echo", "--mode", "public", "--allowed-origin", APP);

  beforeAll(async () => {
    await ensureBuilt();
    ({ db, drop } = await open());
    await runCliJson(["migrate", "--db", db], ENV);
    tenantId = (await cli<{ tenant: { id: string } }>("tenant", "create", "--name", "Limits")).tenant.id;
    // Behind one trusted proxy, so that each test counts from an address of its own.
    servers = await Promise.all([0, 1].map(() => startServe(["--db", db, "--port", "0", "--trust-proxy", "1"], ENV)));
  }, 120_000);

  afterAll(async () => {
    await killAll();
    await drop?.();
  });

  it("a channel's limit set by channel update --rate-limits holds across both servers: exactly that many are served", async () => {
    const created = await publicChannel();
    const updated = await cli<CreatedChannel>(
      "channel",
      "update",
      created.channel.id,
      "--rate-limits",
      '{"publishable_key":{"requests":10,"window_seconds":60}}',
    );
    expect(updated.channel.rate_limits).toEqual({ publishable_key: { requests: 10, window_seconds: 60 } });
    expect(await tally(servers, 30, (server) => execute(server, created.api_key))).toEqual({ "200": 10, "429 rate_limited": 20 });
  }, 60_000);

  it("failed authentications from one address are counted across both servers; a valid key from it is still served", async () => {
    const created = await publicChannel();
    const address = `203.0.113.${Math.floor(Math.random() * 250) + 1}`;
    const wrong = (server: ServeProcess) => execute(server, `svc_pub_${"x".repeat(40)}`, { "x-forwarded-for": address });
    // The default: a hundred a minute.
    expect(await tally(servers, 130, wrong)).toEqual({ "401 invalid_api_key": 100, "429 rate_limited": 30 });
    for (const server of servers) expect((await execute(server, created.api_key, { "x-forwarded-for": address })).status).toBe(200);
    expect((await wrong(servers[0] as ServeProcess)).status).toBe(429);
    expect((await execute(servers[1] as ServeProcess, `svc_pub_${"x".repeat(40)}`, { "x-forwarded-for": "203.0.113.251, 198.51.100.1" })).status).toBe(401);
  }, 60_000);

  it("serve --rate-limits sets the service's limits, and off turns them off", async () => {
    const created = await publicChannel();
    await cli("channel", "update", created.channel.id, "--rate-limits", '{"publishable_key":{"requests":1,"window_seconds":60}}');
    const [strict, off] = await Promise.all([
      startServe(["--db", db, "--port", "0", "--rate-limits", '{"client_address":{"requests":2,"window_seconds":60},"publishable_key":false}'], ENV),
      startServe(["--db", db, "--port", "0", "--rate-limits", "off"], ENV),
    ]);
    // The channel's own limit wins over the service's setting.
    expect((await execute(strict, created.api_key)).status).toBe(200);
    expect((await execute(strict, created.api_key)).status).toBe(429);
    // Off: neither the channel's limit nor any other applies.
    expect(await tally([off], 5, (server) => execute(server, created.api_key))).toEqual({ "200": 5 });
    const free = await publicChannel();
    expect(await tally([strict], 3, (server) => execute(server, free.api_key))).toEqual({ "200": 2, "429 rate_limited": 1 });
  }, 60_000);

  it("a malformed --rate-limits is refused with what is wrong", async () => {
    const unknown = await runCli(["serve", "--db", db, "--port", "0", "--rate-limits", '{"per_key":{"requests":1,"window_seconds":1}}'], ENV);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("--rate-limits takes publishable_key, server_key, client_address, webhook_client, failed_auth, admin, not per_key");
    const zero = await runCli(["channel", "update", randomUUID(), "--db", db, "--rate-limits", '{"server_key":{"requests":0,"window_seconds":1}}'], ENV);
    expect(zero.code).toBe(2);
    expect(zero.stderr).toContain("server_key.requests: requests must be 1 to 1000000000");
  }, 60_000);
}

describe("rate limits across two channelkit serve processes on one SQLite file", () => {
  limitsAcrossInstances(async () => {
    const db = join(tmpdir(), `channelkit-limits-${randomUUID()}.db`);
    return { db, drop: () => Promise.all(["", "-wal", "-shm"].map((suffix) => rm(`${db}${suffix}`, { force: true }))).then(() => undefined) };
  });
});

describeWithPostgres("rate limits across two channelkit serve processes on one Postgres database", (serverUrl) => {
  limitsAcrossInstances(async () => {
    const database = await createTestDatabase(serverUrl);
    return { db: database.url, drop: () => database.drop() };
  });
});
