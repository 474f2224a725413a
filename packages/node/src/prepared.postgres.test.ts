import { randomUUID } from "node:crypto";
import type { ApiKeyRecord, ChannelRecord } from "@channelkit/core";
import { type KyselyStorage, postgres } from "@channelkit/kysely";
import { createTestDatabase, describeWithPostgres, type TestDatabase } from "@channelkit/testkit";
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";

/*
 * The request path's statements run as named prepared statements on Postgres: parsed and
 * planned once per connection. These tests look at the server's side of it.
 */
describeWithPostgres("Postgres prepared statements", (serverUrl) => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase(serverUrl);
  });
  afterAll(async () => {
    await database.drop();
  });

  const NOW = "2026-01-01T00:00:00.000Z";
  async function seeded(storage: KyselyStorage) {
    await storage.migrate();
    const tenant = { id: randomUUID(), name: "Acme", createdAt: NOW };
    await storage.createTenant(tenant);
    const channel: ChannelRecord = {
      id: randomUUID(),
      tenantId: tenant.id,
      name: "c",
      type: "api",
      mode: "server",
      environment: "prod",
      state: "active",
      flowName: "echo",
      allowedOrigins: [],
      defaultStream: false,
      requireSignature: false,
      signingSecretEncrypted: null,
      apiKeyHint: null,
      clientId: null,
      languages: [],
      livechatMessages: {},
      livechatWaitTimeoutSeconds: null,
      runTimeoutSeconds: null,
      resumableStreams: false,
      rateLimits: null,
      widget: {},
      settings: {},
      sealedSettings: null,
      createdAt: NOW,
      updatedAt: NOW,
    };
    const key: ApiKeyRecord = {
      id: randomUUID(),
      channelId: channel.id,
      tenantId: tenant.id,
      hash: `hash-${randomUUID()}`,
      prefix: "svc_live_",
      environment: "prod",
      hint: "svc_live_****abcd",
      createdAt: NOW,
      expiresAt: null,
      revokedAt: null,
    };
    await storage.createChannel(channel, key);
    return { channel, key };
  }

  it("prepares the key lookup once per connection, or not at all when turned off", async () => {
    for (const preparedStatements of [true, false]) {
      const pool = new pg.Pool({ connectionString: database.url, max: 1 });
      const storage = postgres(pool, { preparedStatements });
      try {
        const { key } = await seeded(storage);
        for (let i = 0; i < 3; i++) expect((await storage.findKeyByHash(key.hash))?.key.id).toBe(key.id);
        const client = await pool.connect();
        try {
          const { rows } = await client.query<{ name: string; statement: string }>("select name, statement from pg_prepared_statements");
          const lookups = rows.filter((row) => row.statement.includes('"api_keys"."hash" = $1'));
          expect(
            lookups.map((row) => row.name.startsWith("ck_")),
            `preparedStatements: ${preparedStatements}`,
          ).toEqual(preparedStatements ? [true] : []);
        } finally {
          client.release();
        }
      } finally {
        await pool.end();
      }
    }
  });

  it("discards a connection whose prepared statement another process's migration made stale, and goes on", async () => {
    const pool = new pg.Pool({ connectionString: database.url, max: 1 });
    const storage = postgres(pool);
    try {
      const { key, channel } = await seeded(storage);
      expect((await storage.findKeyByHash(key.hash))?.channel.id).toBe(channel.id);
      const other = new pg.Client({ connectionString: database.url });
      await other.connect();
      await other.query("ALTER TABLE channels ALTER COLUMN name TYPE varchar(300)");
      await other.end();
      // The first use of the stale statement may fail (Postgres refuses a cached plan whose
      // result type changed); the connection is then discarded and the next one prepares anew.
      await storage.findKeyByHash(key.hash).catch(() => undefined);
      expect((await storage.findKeyByHash(key.hash))?.channel.id).toBe(channel.id);
      expect((await storage.findKeyByHash(key.hash))?.channel.id).toBe(channel.id);
    } finally {
      await pool.end();
    }
  });
});
