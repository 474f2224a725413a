/**
 * What is particular to the Kysely storage in a plugin's storage (the store's behaviour is the
 * storage contract's "plugin store" group, run in storage.test.ts): the tables of a plugin,
 * made by its migrations after channelkit's and recorded as `<plugin id>/<name>`, on SQLite
 * and Postgres; `pluginDatabase()`; the sweep of expired rows.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createChannelService, type Logger, memoryStorage, type PluginSchema } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { createTestDatabase, describeWithPostgres } from "@channelkit/testkit";
import { type Kysely, sql } from "kysely";
import { afterEach, describe, expect, it, vi } from "vitest";
import { migrations } from "./migrations.js";
import { pluginDatabase } from "./plugin-database.js";
import { postgres } from "./postgres.js";
import { sqlite } from "./sqlite.js";
import type { KyselyStorage } from "./storage.js";

const CHANNELKIT = Object.keys(migrations);

/** A new empty database: a storage on it (each call another connection or pool), and how to drop it. */
type Open = () => Promise<{ storage: () => KyselyStorage; dispose: () => Promise<void> }>;

const openSqlite: Open = async () => {
  const dir = await mkdtemp(join(tmpdir(), "channelkit-plugin-"));
  return { storage: () => sqlite(join(dir, "plugin.db")), dispose: () => rm(dir, { recursive: true, force: true }) };
};

/** A plugin with a table of its own (`acme_crm_contacts`), whose migrations log their runs in `ran`. */
function crmPlugin(ran: string[], more: PluginSchema["migrations"] = {}) {
  return {
    id: "acme-crm",
    schema: {
      migrations: {
        ...more,
        "0001_contacts": {
          async up(db: unknown) {
            const kysely = db as Kysely<any>;
            // channelkit's tables are there first: a plugin's table may reference them.
            ran.push(`0001_contacts (channels: ${(await kysely.introspection.getTables()).some((table) => table.name === "channels")})`);
            await kysely.schema
              .createTable("acme_crm_contacts")
              .addColumn("id", "text", (c) => c.primaryKey())
              .addColumn("channel_id", "text", (c) => c.notNull().references("channels.id"))
              .addColumn("name", "text", (c) => c.notNull())
              .execute();
          },
          async down(db: unknown) {
            await (db as Kysely<any>).schema.dropTable("acme_crm_contacts").execute();
          },
        },
      },
    },
  };
}

const silent: Logger = { warn: () => undefined, error: () => undefined };

function pluginMigrations(name: string, open: Open) {
  describe(`${name}: a plugin's migrations`, () => {
    const cleanups: (() => Promise<void>)[] = [];
    afterEach(async () => {
      for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    });
    /** A new database; each storage opened on it is closed after the test. */
    async function database() {
      const db = await open();
      cleanups.push(db.dispose);
      return () => {
        const storage = db.storage();
        cleanups.push(() => storage.close().catch(() => undefined));
        return storage;
      };
    }
    const recorded = async (storage: KyselyStorage) =>
      (await sql<{ name: string }>`select name from channelkit_migration order by name`.execute(storage.db)).rows.map((row) => row.name);

    it("run after channelkit's, once, recorded as <plugin id>/<name>: pending before, none after, a second migrate does nothing", async () => {
      const connect = await database();
      const storage = connect();
      const ran: string[] = [];
      const plugins = [crmPlugin(ran), { id: "no-tables" }, { id: "empty", schema: { migrations: {} } }];
      expect(await storage.schemaStatus({ plugins })).toEqual({
        known: [...CHANNELKIT, "acme-crm/0001_contacts"],
        pending: [...CHANNELKIT, "acme-crm/0001_contacts"],
        unknown: [],
      });
      await storage.migrate({ plugins });
      expect(ran).toEqual(["0001_contacts (channels: true)"]);
      expect(await storage.schemaStatus({ plugins })).toEqual({ known: [...CHANNELKIT, "acme-crm/0001_contacts"], pending: [], unknown: [] });
      expect(await recorded(storage)).toEqual([...CHANNELKIT, "acme-crm/0001_contacts"].sort());
      // The plugin's table, through the storage's Kysely instance.
      const db = pluginDatabase(storage);
      expect(db).toBe(storage.db);
      expect(await db.selectFrom("acme_crm_contacts").selectAll().execute()).toEqual([]);
      // A second migrate, and one from another connection: nothing runs again.
      await storage.migrate({ plugins });
      await connect().migrate({ plugins });
      expect(ran).toHaveLength(1);
      expect(await recorded(storage)).toEqual([...CHANNELKIT, "acme-crm/0001_contacts"].sort());
    });

    it("a database migrated without the plugin has its migrations pending; migrate without it still works once they are applied", async () => {
      const connect = await database();
      const storage = connect();
      const ran: string[] = [];
      const plugins = [crmPlugin(ran)];
      await storage.migrate();
      expect(await storage.schemaStatus({ plugins })).toMatchObject({ pending: ["acme-crm/0001_contacts"], unknown: [] });
      expect(await storage.schemaStatus()).toEqual({ known: CHANNELKIT, pending: [], unknown: [] });
      // The service, given the plugin, refuses to start until they are applied, and says how.
      const refused = createChannelService({ storage, flows: demoFlows, plugins, secretKey: "a".repeat(64), logger: silent });
      await expect(refused).rejects.toThrow(`1 of ${CHANNELKIT.length + 1} migrations are not applied (acme-crm/0001_contacts)`);
      await expect(refused).rejects.toThrow("`await storage.migrate({ plugins })`");
      await storage.migrate({ plugins });
      expect(ran).toHaveLength(1);
      // Without the plugin: channelkit's migrations run as before, and the plugin's are not "unknown" (a newer version's).
      await storage.migrate();
      expect(await storage.schemaStatus()).toEqual({ known: CHANNELKIT, pending: [], unknown: [] });
      // With the plugin, but without the migration it applied: that one is unknown.
      expect(await storage.schemaStatus({ plugins: [{ id: "acme-crm" }] })).toMatchObject({ pending: [], unknown: ["acme-crm/0001_contacts"] });
      const service = await createChannelService({ storage: connect(), flows: demoFlows, plugins, secretKey: "a".repeat(64), logger: silent });
      await service.close();
    });

    it("a plugin's migrations added later run in the order of their names, after those applied", async () => {
      const storage = (await database())();
      const ran: string[] = [];
      await storage.migrate({ plugins: [crmPlugin(ran)] });
      const later = crmPlugin(ran, {
        "0003_tags": {
          async up(db) {
            ran.push("0003_tags");
            await (db as Kysely<any>).schema.alterTable("acme_crm_contacts").addColumn("tags", "text").execute();
          },
        },
        "0002_email": {
          async up(db) {
            ran.push("0002_email");
            await (db as Kysely<any>).schema.alterTable("acme_crm_contacts").addColumn("email", "text").execute();
          },
        },
      });
      expect((await storage.schemaStatus({ plugins: [later] })).pending).toEqual(["acme-crm/0002_email", "acme-crm/0003_tags"]);
      expect((await storage.schemaStatus({ plugins: [later] })).known.slice(-3)).toEqual([
        "acme-crm/0001_contacts",
        "acme-crm/0002_email",
        "acme-crm/0003_tags",
      ]);
      await storage.migrate({ plugins: [later] });
      expect(ran).toEqual(["0001_contacts (channels: true)", "0002_email", "0003_tags"]);
      const columns = (await storage.db.introspection.getTables()).find((table) => table.name === "acme_crm_contacts")?.columns.map((column) => column.name);
      expect(columns).toEqual(["id", "channel_id", "name", "email", "tags"]);
    });

    it("a failing migration is not recorded and fails migrate, naming it; two plugins of one id are refused", async () => {
      const storage = (await database())();
      const broken = {
        id: "broken",
        schema: {
          migrations: {
            "0001_bad": {
              async up(db: unknown) {
                await sql`create table broken_things (id text primary key)`.execute(db as Kysely<any>);
                throw new Error("the plugin's bug");
              },
            },
          },
        },
      };
      await expect(storage.migrate({ plugins: [broken] })).rejects.toThrow("channelkit: migration broken/0001_bad failed: the plugin's bug");
      expect((await storage.schemaStatus({ plugins: [broken] })).pending).toContain("broken/0001_bad");
      await expect(storage.migrate({ plugins: [{ id: "same" }, { id: "same" }] })).rejects.toThrow(TypeError);
      await expect(storage.migrate({ plugins: [{ id: "Not An Id", schema: { migrations: { a: { up: async () => undefined } } } }] })).rejects.toThrow(
        /lower case letters, digits and "-"/,
      );
    });
  });
}

pluginMigrations("SQLite", openSqlite);
describeWithPostgres("Postgres", (serverUrl) => {
  pluginMigrations("Postgres", async () => {
    const database = await createTestDatabase(serverUrl);
    return { storage: () => postgres(database.url), dispose: () => database.drop() };
  });

  it("Postgres: two storages migrating the same plugins at once run each migration once", async () => {
    const database = await createTestDatabase(serverUrl);
    const [a, b] = [postgres(database.url), postgres(database.url)];
    try {
      const ran: string[] = [];
      await Promise.all([a.migrate({ plugins: [crmPlugin(ran)] }), b.migrate({ plugins: [crmPlugin(ran)] })]);
      expect(ran).toHaveLength(1);
      expect((await a.schemaStatus({ plugins: [crmPlugin(ran)] })).pending).toEqual([]);
    } finally {
      await Promise.all([a.close(), b.close()]);
      await database.drop();
    }
  });
});

describe("pluginDatabase", () => {
  it("refuses a storage without tables, saying where a plugin's data goes instead", () => {
    expect(() => pluginDatabase(memoryStorage())).toThrow(
      "channelkit: pluginDatabase() needs a SQL storage of @channelkit/kysely (sqlite(), postgres(), d1()...); this storage has no tables for a plugin: keep the plugin's data in ctx.storage.pluginStore(id), which every storage has",
    );
  });
});

describe("the sweep of expired values and leases (SQLite)", () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    vi.restoreAllMocks();
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it("deletes every expired row at most once a minute, on a write; an expired row reads as absent before, and is deleted when met", async () => {
    const { storage: connect, dispose } = await openSqlite();
    cleanups.push(dispose);
    const storage = connect();
    cleanups.push(() => storage.close());
    await storage.migrate();
    const rows = async () =>
      [
        ...(await storage.db.selectFrom("plugin_kv").select(["plugin_id", "key"]).execute()).map((row) => `${row.plugin_id}/${row.key}`),
        ...(await storage.db.selectFrom("plugin_leases").select(["plugin_id", "name"]).execute()).map((row) => `${row.plugin_id}/lease ${row.name}`),
      ].sort();
    let now = Date.now();
    vi.spyOn(Date, "now").mockImplementation(() => now);
    const [a, b] = [storage.pluginStore("a"), storage.pluginStore("b")];
    await a.set("read", 1, { ttlMs: 1000 });
    await b.add("unread", 2, { ttlMs: 1000 });
    await a.set("kept", 3);
    await b.set("later", 4, { ttlMs: 120_000 });
    await a.acquireLease("lapsing", "h", 1000);
    now += 2000;
    // Expired: absent; the one read is deleted, the other is still stored (no sweep within the minute).
    expect(await a.get("read")).toBeUndefined();
    expect(await b.get("later")).toBe(4);
    await a.set("x", 0);
    expect(await rows()).toEqual(["a/kept", "a/lease lapsing", "a/x", "b/later", "b/unread"]);
    now += 60_000;
    await a.set("y", 0);
    expect(await rows()).toEqual(["a/kept", "a/x", "a/y", "b/later"]);
  });
});
