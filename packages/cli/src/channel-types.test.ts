/**
 * `channelkit channel create/update` with a channel type of the config's plugins (issue 42):
 * the settings given by `--setting NAME=VALUE` or `--settings JSON`, checked by the type's
 * schema, the secrets sealed in the database and never printed back. The commands register
 * the config's types without starting its plugins.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sqlite } from "@channelkit/kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "./main.js";
import { makeApp, type TestApp } from "./test-process.js";

const MASTER_KEY = randomBytes(32).toString("hex");
const TOKEN = "7100000001:AAE-cli-bot-token-in-clear";
const ROTATED = "7100000002:AAE-cli-bot-token-rotated";

/** A config with the demo flows and a plugin registering the `telegram` type; starting it fails, as commands other than serve never do. */
const CONFIG = `import { demoFlows } from "@channelkit/core/demo";
import { z } from "zod";

const telegramType = {
  name: "telegram",
  settings: z.object({ bot_token: z.string().min(10), greeting: z.string().optional() }),
  secrets: ["bot_token"],
};

export default {
  flows: demoFlows,
  plugins: [{ id: "telegram", channelTypes: [telegramType], init() { throw new Error("a command other than serve started the plugin"); } }],
};
`;

let app: TestApp;
/** A directory without a config: the command knows the demo flows and the built-in types only. */
let bare: string;
const files: string[] = [];

beforeAll(async () => {
  app = await makeApp({ "channelkit.config.mjs": CONFIG });
  bare = await mkdtemp(join(tmpdir(), "channelkit-bare-"));
});

afterAll(async () => {
  await app?.remove();
  if (bare) await rm(bare, { recursive: true, force: true });
  await Promise.all(files.flatMap((file) => ["", "-wal", "-shm"].map((suffix) => rm(`${file}${suffix}`, { force: true }))));
});

function tempDb(): string {
  const file = join(tmpdir(), `channelkit-cli-types-${randomUUID()}.db`);
  files.push(file);
  return file;
}

/** Runs `channelkit ...args` in-process in the app's directory (its config found there, or not with `demo`). */
async function cli(args: string[], options: { demo?: boolean } = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(args, {
    env: { CHANNELKIT_SECRET_KEY: MASTER_KEY },
    cwd: options.demo ? bare : app.path,
    out: (line) => out.push(line),
    err: (line) => err.push(line),
  });
  const all = [...out, ...err].join("\n");
  return { code, out, err, all, json: () => JSON.parse(out[0] as string) };
}

describe("channelkit channel create/update with a plugin's channel type", () => {
  it("creates and updates a telegram channel with its settings; the secret is sealed in the database and never printed", async () => {
    const db = tempDb();
    const tenant = await cli(["tenant", "create", "--name", "Bots", "--db", db]);
    expect(tenant.code).toBe(0);
    const tenantId = tenant.json().tenant.id as string;

    const created = await cli([
      "channel",
      "create",
      "--tenant",
      tenantId,
      "--flow",
      "echo",
      "--type",
      "telegram",
      "--setting",
      `bot_token=${TOKEN}`,
      "--setting",
      "greeting=Hi=there",
      "--db",
      db,
    ]);
    expect(created.err).toEqual([]);
    expect(created.code).toBe(0);
    const { channel, api_key } = created.json();
    expect(channel).toMatchObject({ type: "telegram", mode: "server", settings: { greeting: "Hi=there" }, secrets: ["bot_token"] });
    expect(api_key).toMatch(/^svc_live_/);
    expect(created.all).not.toContain(TOKEN);

    const storage = sqlite(db);
    try {
      const row = await storage.db.selectFrom("channels").selectAll().where("id", "=", channel.id).executeTakeFirstOrThrow();
      expect(row.sealed_settings).toMatch(/^v1:/);
      expect(JSON.stringify(row)).not.toContain(TOKEN);

      // --settings JSON, then --setting over it: the rotation of the token, and a greeting removed by null.
      const updated = await cli([
        "channel",
        "update",
        channel.id,
        "--settings",
        '{"greeting":null,"bot_token":"overridden-below"}',
        "--setting",
        `bot_token=${ROTATED}`,
        "--db",
        db,
      ]);
      expect(updated.err).toEqual([]);
      expect(updated.code).toBe(0);
      expect(updated.json().channel).toMatchObject({ settings: {}, secrets: ["bot_token"] });
      expect(updated.all).not.toContain(ROTATED);
      const rotatedRow = await storage.db.selectFrom("channels").selectAll().where("id", "=", channel.id).executeTakeFirstOrThrow();
      expect(rotatedRow.sealed_settings).not.toBe(row.sealed_settings);
      expect(JSON.stringify(rotatedRow)).not.toContain(ROTATED);
    } finally {
      await storage.close();
    }

    for (const args of [
      ["channel", "show", channel.id],
      ["channel", "list", "--tenant", tenantId],
      ["audit", "--tenant", tenantId],
    ]) {
      const read = await cli([...args, "--db", db]);
      expect(read.code).toBe(0);
      expect(read.all).not.toContain(TOKEN);
      expect(read.all).not.toContain(ROTATED);
    }
    const audit = (await cli(["audit", "--tenant", tenantId, "--channel", channel.id, "--db", db])).json();
    expect(audit.events[0]).toMatchObject({ operation: "update_channel", actor: "cli", changes: { "settings.bot_token": { from: "previous", to: "new" } } });
  });

  it("refuses invalid settings naming settings.<field>, an unknown type naming the registered ones, and bad options without repeating their value", async () => {
    const db = tempDb();
    const tenantId = (await cli(["tenant", "create", "--name", "Bots", "--db", db])).json().tenant.id as string;
    const create = (...extra: string[]) => cli(["channel", "create", "--tenant", tenantId, "--flow", "echo", "--db", db, ...extra]);

    const missing = await create("--type", "telegram", "--setting", "greeting=Hi");
    expect(missing.code).toBe(1);
    expect(JSON.parse(missing.err[0] as string).error).toMatchObject({ code: "validation_error", message: expect.stringMatching(/^settings\.bot_token: /) });

    const unknown = await create("--type", "slack");
    expect(unknown.code).toBe(1);
    expect(JSON.parse(unknown.err[0] as string).error.message).toBe('Unknown channel type "slack". Registered types: api, webhook, telegram.');

    const builtIn = await create("--setting", `bot_token=${TOKEN}`);
    expect(builtIn.code).toBe(1);
    expect(JSON.parse(builtIn.err[0] as string).error.message).toContain("api channels take no settings");
    expect(builtIn.all).not.toContain(TOKEN);

    const noValue = await create("--type", "telegram", "--setting", TOKEN);
    expect(noValue.code).toBe(2);
    expect(noValue.all).toContain("--setting takes NAME=VALUE");
    expect(noValue.all).not.toContain(TOKEN);
    const notJson = await create("--type", "telegram", "--settings", `{bot_token: ${TOKEN}}`);
    expect(notJson.code).toBe(2);
    expect(notJson.all).toContain("--settings takes a JSON object");
    expect(notJson.all).not.toContain(TOKEN);

    // Without the config, the command knows the built-in types only.
    const demo = await cli(["channel", "create", "--tenant", tenantId, "--flow", "echo", "--type", "telegram", "--setting", `bot_token=${TOKEN}`, "--db", db], {
      demo: true,
    });
    expect(demo.code).toBe(1);
    expect(JSON.parse(demo.err.at(-1) as string).error.message).toBe('Unknown channel type "telegram". Registered types: api, webhook.');
  });
});
