/**
 * The retention sweep across two `channelkit serve` processes on one database (a SQLite file,
 * then Postgres): both wake every period, one sweeps it; the conversations of a channel that
 * ended more than its retention_days ago are deleted once, each batch audited, and those still
 * live (a live chat waiting, a channel without retention, a recent conversation) stay.
 */
import { randomBytes } from "node:crypto";
import { openStorage } from "@channelkit/kysely";
import { describeWithPostgres } from "@channelkit/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, killAll, runCli, runCliJson, type ServeProcess, startServe } from "./test-process.js";
import { postgresDatabase, type SharedDatabase, sqliteDatabase } from "./test-runs.js";

const ENV = { CHANNELKIT_SECRET_KEY: randomBytes(32).toString("hex"), CHANNELKIT_ADMIN_JWT_SECRET: randomBytes(32).toString("hex") };
const LONG_AGO = new Date(Date.now() - 40 * 86_400_000).toISOString();

async function converse(server: ServeProcess, key: string): Promise<string> {
  const response = await fetch(`${server.url}/public/v1/api/execute`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ payload: "hello", stream: false }),
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { conversation_id: string }).conversation_id;
}

/** Reads `read` every 100 ms until `done` holds of what it read (at most `timeoutMs`), and returns that. */
async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`waited ${timeoutMs} ms for ${what}; last read: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function retentionAcrossInstances(open: () => Promise<SharedDatabase>) {
  let database: SharedDatabase;
  let tenantId: string;
  const cli = <T = any>(...args: string[]) => runCliJson<T>([...args, "--db", database.db], ENV);
  const channel = (flow: string, ...flags: string[]) =>
    cli<{ channel: { id: string; retention_days: number | null }; api_key: string }>("channel", "create", "--tenant", tenantId, "--flow", flow, ...flags);

  beforeAll(async () => {
    await ensureBuilt();
    database = await open();
    await cli("migrate");
    tenantId = (await cli<{ tenant: { id: string } }>("tenant", "create", "--name", "Retention")).tenant.id;
  }, 120_000);

  afterAll(async () => {
    await killAll();
    await database?.drop();
  });

  it("retention_days is set and cleared by the command, and checked", async () => {
    const created = await channel("echo", "--retention-days", "30");
    expect(created.channel.retention_days).toBe(30);
    expect((await cli("channel", "update", created.channel.id, "--retention-days", "off")).channel.retention_days).toBeNull();
    const refused = await runCli(["channel", "update", created.channel.id, "--retention-days", "0", "--db", database.db], ENV);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("--retention-days takes an integer from 1 to 36500");
    const interval = await runCli(["serve", "--db", database.db, "--port", "0", "--retention-interval-ms", "10"], ENV);
    expect(interval.code).toBe(2);
    expect(interval.stderr).toContain("--retention-interval-ms takes an integer from 1000");
  }, 60_000);

  it("two instances sweep once per period between them: ended conversations deleted once, live ones kept", async () => {
    const retained = await channel("echo", "--retention-days", "30");
    const forever = await channel("echo");
    const handover = await channel("handover", "--retention-days", "30");
    const servers = await Promise.all([0, 1].map(() => startServe(["--db", database.db, "--port", "0", "--retention-interval-ms", "1000"], ENV)));

    const ended = await Promise.all(Array.from({ length: 5 }, (_, i) => converse(servers[i % 2] as ServeProcess, retained.api_key)));
    const recent = await converse(servers[0] as ServeProcess, retained.api_key);
    const keptForever = await converse(servers[1] as ServeProcess, forever.api_key);
    const waiting = await converse(servers[0] as ServeProcess, handover.api_key);

    const storage = openStorage(database.db);
    try {
      // Forty days without activity, for all but the recent one.
      await storage.db
        .updateTable("conversations")
        .set({ updated_at: LONG_AGO, mode_since: LONG_AGO })
        .where("id", "in", [...ended, keptForever, waiting])
        .execute();
      const sweptEvents = () =>
        storage.db.selectFrom("audit_events").select(["channel_id", "changes", "actor"]).where("operation", "=", "retention_sweep").execute();
      const events = await until(
        sweptEvents,
        (rows) => rows.reduce((sum, row) => sum + (JSON.parse(row.changes) as { conversations: { from: number } }).conversations.from, 0) >= 5,
        "the sweep of the five ended conversations",
      );

      // Periods go on being claimed, each by one instance; none sweeps what another swept.
      const periods = new Map<string, string>();
      await until(
        async () => {
          const rows = await storage.db
            .selectFrom("plugin_kv")
            .select(["key", "value"])
            .where("plugin_id", "=", "channelkit-retention")
            .where("key", "like", "period:%")
            .execute();
          for (const row of rows) {
            expect(periods.get(row.key) ?? row.value).toBe(row.value);
            periods.set(row.key, row.value);
          }
          return periods.size;
        },
        (size) => size >= 3,
        "three periods claimed",
      );
      const after = await sweptEvents();
      expect(after).toEqual(events);
      expect(after.every((row) => row.channel_id === retained.channel.id && row.actor === "retention")).toBe(true);
      const deleted = after.reduce((sum, row) => sum + (JSON.parse(row.changes) as { conversations: { from: number } }).conversations.from, 0);
      expect(deleted).toBe(5);

      const left = await storage.db
        .selectFrom("conversations")
        .select("id")
        .where("id", "in", [...ended, recent, keptForever, waiting])
        .execute();
      expect(left.map((row) => row.id).sort()).toEqual([recent, keptForever, waiting].sort());
      const orphans = await storage.db.selectFrom("messages").select("conversation_id").where("conversation_id", "in", ended).execute();
      expect(orphans).toEqual([]);
      expect(await storage.db.selectFrom("runs").select("id").where("conversation_id", "in", ended).execute()).toEqual([]);
    } finally {
      await storage.close();
    }

    // The command sweeps at once; nothing is left to delete.
    expect(await cli("conversation", "sweep")).toEqual({ channels: 2, conversations: 0, messages: 0, runs: 0 });
    await killAll();
  }, 120_000);
}

describe("the retention sweep across two channelkit serve processes on one SQLite file", () => {
  retentionAcrossInstances(() => sqliteDatabase("retention"));
});

describeWithPostgres("the retention sweep across two channelkit serve processes on one Postgres database", (serverUrl) => {
  retentionAcrossInstances(() => postgresDatabase(serverUrl));
});
