/**
 * The plugin store and a plugin's migrations on Cloudflare D1 (issue 42), through miniflare's
 * D1 (workerd's SQLite) from Node: `d1(binding)` on the binding `getD1Database` gives. The
 * store's statements are SQLite's (the same as `sqlite()`), sent statement by statement.
 */
import { pluginStoreContract } from "@channelkit/testkit/storage";
import { type Kysely, sql } from "kysely";
import { Miniflare } from "miniflare";
import { afterAll, describe, expect, it } from "vitest";
import { type D1Binding, d1, pluginDatabase } from "./d1.js";
import { migrations } from "./migrations.js";

const started: Miniflare[] = [];

/** A new, empty in-memory D1 database. */
async function d1Database(): Promise<D1Binding> {
  const mf = new Miniflare({
    modules: true,
    script: "export default { fetch() { return new Response(null, { status: 404 }); } };",
    compatibilityDate: "2026-04-01",
    d1Databases: ["DB"],
    cf: false,
  });
  started.push(mf);
  return (await mf.getD1Database("DB")) as unknown as D1Binding;
}

afterAll(async () => {
  await Promise.all(started.map((mf) => mf.dispose()));
});

pluginStoreContract("D1 (miniflare)", async () => d1(await d1Database(), { warn: () => undefined }));

describe("D1 (miniflare): a plugin's migrations", () => {
  it("run after channelkit's, once, recorded as <plugin id>/<name>; pending before, none after", async () => {
    const storage = d1(await d1Database(), { warn: () => undefined });
    let ran = 0;
    const plugins = [
      {
        id: "acme-crm",
        schema: {
          migrations: {
            "0001_contacts": {
              async up(db: unknown) {
                ran++;
                await (db as Kysely<any>).schema
                  .createTable("acme_crm_contacts")
                  .addColumn("id", "text", (c) => c.primaryKey())
                  .execute();
              },
            },
          },
        },
      },
    ];
    const all = [...Object.keys(migrations), "acme-crm/0001_contacts"];
    expect(await storage.schemaStatus({ plugins })).toEqual({ known: all, pending: all, unknown: [] });
    await storage.migrate({ plugins });
    await storage.migrate({ plugins });
    expect(ran).toBe(1);
    expect(await storage.schemaStatus({ plugins })).toEqual({ known: all, pending: [], unknown: [] });
    await pluginDatabase(storage).insertInto("acme_crm_contacts").values({ id: "c1" }).execute();
    const { rows } = await sql<{ id: string }>`select id from acme_crm_contacts`.execute(pluginDatabase(storage));
    expect(rows).toEqual([{ id: "c1" }]);
  }, 120_000);
});
