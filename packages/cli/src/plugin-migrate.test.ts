/**
 * `channelkit migrate` with a config whose plugin has tables of its own (issue 42): the
 * plugin's migrations run after channelkit's, recorded as `<plugin id>/<name>`, once; the
 * other commands then start on that schema. In-process, in an app directory with the config.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sqlite } from "@channelkit/kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "./main.js";
import { makeApp, type TestApp } from "./test-process.js";

/** A config with a flow and a plugin whose one migration makes `acme_crm_contacts`. Plain objects: nothing to import. */
const CONFIG = `export default {
  flows: [{ name: "echo", async *run() {} }],
  plugins: [
    {
      id: "acme-crm",
      schema: {
        migrations: {
          "0001_contacts": {
            async up(db) {
              await db.schema.createTable("acme_crm_contacts").addColumn("id", "text", (c) => c.primaryKey()).execute();
            },
          },
        },
      },
    },
  ],
};
`;

let app: TestApp;
const files: string[] = [];

beforeAll(async () => {
  app = await makeApp({ "channelkit.config.mjs": CONFIG });
});

afterAll(async () => {
  await app?.remove();
  await Promise.all(files.flatMap((file) => ["", "-wal", "-shm"].map((suffix) => rm(`${file}${suffix}`, { force: true }))));
});

async function cli(args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(args, {
    env: { CHANNELKIT_SECRET_KEY: randomBytes(32).toString("hex") },
    cwd: app.path,
    out: (line) => out.push(line),
    err: (line) => err.push(line),
  });
  return { code, out, err };
}

/** The migrations recorded in the database at `file`, and its tables. */
async function schemaOf(file: string) {
  const storage = sqlite(file);
  try {
    const recorded = await storage.db
      .selectFrom("channelkit_migration" as never)
      .select("name" as never)
      .execute();
    const tables = (await storage.db.introspection.getTables()).map((table) => table.name);
    return { recorded: recorded.map((row) => String((row as { name: string }).name)), tables };
  } finally {
    await storage.close();
  }
}

describe("channelkit migrate with a config's plugin that has tables", () => {
  it("runs the plugin's migrations after channelkit's, once; the commands then start on that schema", async () => {
    const db = join(tmpdir(), `channelkit-cli-plugin-${randomUUID()}.db`);
    files.push(db);
    const migrated = await cli(["migrate", "--db", db]);
    expect(migrated.err).toEqual([]);
    expect(migrated).toMatchObject({ code: 0, out: ['{"migrated":true}'] });
    const schema = await schemaOf(db);
    expect(schema.recorded).toContain("acme-crm/0001_contacts");
    expect(schema.recorded).toContain("0001_initial");
    expect(schema.tables).toContain("acme_crm_contacts");
    // Again: nothing to do (the table exists, and would fail a second creation).
    expect(await cli(["migrate", "--db", db])).toMatchObject({ code: 0, out: ['{"migrated":true}'] });
    expect((await schemaOf(db)).recorded.filter((name) => name.startsWith("acme-crm/"))).toEqual(["acme-crm/0001_contacts"]);
    expect(await cli(["tenant", "list", "--db", db])).toMatchObject({ code: 0, out: ['{"tenants":[]}'] });
  });
});
