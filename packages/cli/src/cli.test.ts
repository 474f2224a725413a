import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { randomBytes, randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createSecretBox, hashApiKey } from "@channelkit/core";
import { sqlite } from "@channelkit/kysely";
import { jwtVerify } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main, servesForever } from "./main.js";
import { ensureBuilt, killAll, makeApp, startServe } from "./test-process.js";

const MASTER_KEY = randomBytes(32).toString("hex");
const JWT_SECRET = "test-admin-jwt-secret-0123456789";
const files: string[] = [];
const apps: { remove(): Promise<void> }[] = [];

function tempDb(): string {
  const file = join(tmpdir(), `channelkit-cli-${randomUUID()}.db`);
  files.push(file);
  return file;
}

afterAll(async () => {
  await killAll();
  await Promise.all(apps.map((app) => app.remove()));
  await Promise.all(files.flatMap((file) => ["", "-wal", "-shm", ".demo-widget.json"].map((suffix) => rm(`${file}${suffix}`, { force: true }))));
});

/** Runs `channelkit ...args` in-process with captured output. */
async function cli(args: string[], env: Record<string, string | undefined> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(args, {
    env: { CHANNELKIT_SECRET_KEY: MASTER_KEY, CHANNELKIT_ADMIN_JWT_SECRET: JWT_SECRET, ...env },
    out: (line) => out.push(line),
    err: (line) => err.push(line),
  });
  return {
    code,
    out,
    err,
    /** stdout as the one JSON document every command prints. */
    json: () => {
      expect(out).toHaveLength(1);
      return JSON.parse(out[0] as string);
    },
    /** stderr as the refusal envelope. */
    error: () => {
      expect(err).toHaveLength(1);
      return JSON.parse(err[0] as string) as { error: { code: string; message: string } };
    },
  };
}

async function tenant(db: string): Promise<string> {
  const result = await cli(["tenant", "create", "--name", "Acme", "--db", db]);
  expect(result.code).toBe(0);
  return result.json().tenant.id;
}

async function channel(db: string, tenantId: string, ...extra: string[]) {
  const result = await cli(["channel", "create", "--tenant", tenantId, "--flow", "echo", "--db", db, ...extra]);
  expect(result.err).toEqual([]);
  expect(result.code).toBe(0);
  return result.json() as { channel: Record<string, unknown> & { id: string }; api_key: string; signing_secret: string | null };
}

describe("channelkit migrate and tenant create", () => {
  it("migrates a new database, twice without harm", async () => {
    const db = tempDb();
    for (let i = 0; i < 2; i++) {
      const result = await cli(["migrate", "--db", db]);
      expect(result.code).toBe(0);
      expect(result.json()).toEqual({ migrated: true });
    }
    const storage = sqlite(db);
    try {
      expect(await storage.countTenants()).toBe(0);
    } finally {
      await storage.close();
    }
  });

  it("creates a tenant and prints it", async () => {
    const db = tempDb();
    const result = await cli(["tenant", "create", "--name", "  Acme Corp ", "--db", db]);
    expect(result.code).toBe(0);
    const { tenant: created } = result.json();
    expect(created).toEqual({ id: expect.stringMatching(/^[0-9a-f-]{36}$/), name: "Acme Corp", created_at: expect.any(String) });
    expect(Number.isNaN(Date.parse(created.created_at))).toBe(false);
    const storage = sqlite(db);
    try {
      expect((await storage.findTenant(created.id))?.name).toBe("Acme Corp");
    } finally {
      await storage.close();
    }
  });

  it("takes --db before the command too, in both spellings", async () => {
    const db = tempDb();
    const created = await cli(["--db", db, "tenant", "create", "--name", "Before"]);
    expect(created.code).toBe(0);
    const id = created.json().tenant.id;
    const listed = await cli([`--db=${db}`, "tenant", "list"]);
    expect(listed.code).toBe(0);
    expect(listed.json().tenants.map((t: { id: string }) => t.id)).toEqual([id]);
    expect((await cli(["--db", db])).code).toBe(2);
  });

  it("takes a command's own options before its name too (--demo serve is serve --demo)", async () => {
    const db = tempDb();
    const created = await cli(["--name", "Before", "tenant", "create", "--db", db]);
    expect(created.code).toBe(0);
    expect(created.json().tenant.name).toBe("Before");
    expect(servesForever(["--demo", "serve", "--port", "0"])).toBe(true);
    expect(servesForever(["--db", db, "serve"])).toBe(true);
    expect(servesForever(["--db", db, "tenant", "list"])).toBe(false);
    const wrong = await cli(["--demo", "tenant", "list", "--db", db]);
    expect(wrong.code).toBe(2);
    expect(wrong.err[0]).toContain("--demo");
  });

  it("warns of a CHANNELKIT_* variable it does not read (a typo of CHANNELKIT_DB), not of the tests' own", async () => {
    const db = tempDb();
    const result = await cli(["tenant", "list", "--db", db], { CHANNELKIT_DATABASE: "postgres://x", CHANNELKIT_TEST_POSTGRES_URL: "postgres://y" });
    expect(result.code).toBe(0);
    expect(result.err).toEqual([
      expect.stringMatching(/^channelkit: WARNING: CHANNELKIT_DATABASE is not a variable channelkit reads, and is ignored \(it reads CHANNELKIT_DB, /),
    ]);
  });

  it("refuses a database URL of a scheme it does not know, naming the ones it knows", async () => {
    const result = await cli(["tenant", "list", "--db", "mysql://root@127.0.0.1/app"]);
    expect(result.code).toBe(1);
    expect(result.error().error).toEqual({
      code: "database_error",
      message: "the database (--db or CHANNELKIT_DB) is a mysql:// URL: channelkit knows postgres:// and postgresql:// URLs (Postgres) and file paths (SQLite)",
    });
  });

  it("uses CHANNELKIT_DB when --db is not given", async () => {
    const db = tempDb();
    const id = (await cli(["tenant", "create", "--name", "Env"], { CHANNELKIT_DB: db })).json().tenant.id;
    const storage = sqlite(db);
    try {
      expect(await storage.findTenant(id)).not.toBeNull();
    } finally {
      await storage.close();
    }
  });

  it("prints help on --help with exit 0, and on no arguments with exit 2", async () => {
    const help = await cli(["--help"]);
    expect(help.code).toBe(0);
    expect(help.out.join("\n")).toContain("Usage: channelkit <command>");
    const none = await cli([]);
    expect(none.code).toBe(2);
    expect(none.err.join("\n")).toContain("Usage: channelkit <command>");
    expect(none.out).toEqual([]);
  });
});

describe("channelkit channel create", () => {
  let db: string;
  let tenantId: string;
  beforeAll(async () => {
    db = tempDb();
    tenantId = await tenant(db);
  });

  it("creates a prod server channel by default, with a svc_live_ key and no signing secret", async () => {
    const created = await channel(db, tenantId);
    expect(created.api_key).toMatch(/^svc_live_[0-9A-Za-z]{40,}$/);
    expect(created.signing_secret).toBeNull();
    expect(created.channel).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      tenant_id: tenantId,
      name: null,
      type: "api",
      mode: "server",
      environment: "prod",
      state: "active",
      flow: "echo",
      api_key_hint: `svc_live_****${created.api_key.slice(-4)}`,
      has_signing_secret: false,
      config: { require_signature: false },
      allowed_origins: [],
      default_stream: false,
      widget: {},
      livechat: { status_messages: {}, wait_timeout_seconds: null },
      run_timeout_seconds: null,
      retention_days: null,
      resumable_streams: false,
      rate_limits: {},
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    // The key is stored only as its hash, and opens this very channel.
    const storage = sqlite(db);
    try {
      const found = await storage.findKeyByHash(await hashApiKey(created.api_key));
      expect(found?.channel.id).toBe(created.channel.id);
      expect(found?.key).toMatchObject({ prefix: "svc_live_", environment: "prod", revokedAt: null });
    } finally {
      await storage.close();
    }
  });

  it("applies every option", async () => {
    const created = await channel(
      db,
      tenantId,
      "--type",
      "api",
      "--environment",
      "staging",
      "--mode",
      "public",
      "--allowed-origin",
      "https://app.example.com",
      "--allowed-origin",
      "http://localhost:5173",
      "--default-stream",
      "--require-signature",
      "--languages",
      "en_US, fr_FR",
      "--name",
      "Mobile app",
    );
    expect(created.api_key).toMatch(/^svc_pub_[0-9A-Za-z]{40,}$/);
    expect(created.signing_secret).toEqual(expect.any(String));
    expect(created.signing_secret?.length).toBeGreaterThanOrEqual(32);
    expect(created.channel).toMatchObject({
      name: "Mobile app",
      type: "api",
      mode: "public",
      environment: "staging",
      state: "active",
      api_key_hint: `svc_pub_****${created.api_key.slice(-4)}`,
      has_signing_secret: true,
      config: { require_signature: true },
      allowed_origins: ["https://app.example.com", "http://localhost:5173"],
      default_stream: true,
    });
    // The signing secret is stored sealed under CHANNELKIT_SECRET_KEY, and only so.
    const storage = sqlite(db);
    try {
      const stored = await storage.findChannel(created.channel.id);
      expect(stored?.signingSecretEncrypted).not.toContain(created.signing_secret);
      expect(await createSecretBox(MASTER_KEY).decrypt(stored?.signingSecretEncrypted ?? "")).toBe(created.signing_secret);
      expect(stored?.languages).toEqual(["en_US", "fr_FR"]);
    } finally {
      await storage.close();
    }
  });

  it("gives dev and staging server channels svc_test_ keys", async () => {
    for (const environment of ["dev", "staging"]) {
      const created = await channel(db, tenantId, "--environment", environment);
      expect(created.api_key.startsWith("svc_test_")).toBe(true);
      expect(created.channel.environment).toBe(environment);
    }
  });

  it("creates a webhook channel with a client_id, its languages and its secret (shown once, not required)", async () => {
    const created = await channel(db, tenantId, "--type", "webhook", "--languages", "en_US,fr_FR");
    expect(created.channel.type).toBe("webhook");
    expect(created.channel.client_id).toEqual(expect.stringMatching(/^[0-9A-Za-z]{16,}$/));
    expect(created.channel.languages).toEqual(["en_US", "fr_FR"]);
    expect(created.api_key.startsWith("svc_live_")).toBe(true);
    expect(created.signing_secret).toEqual(expect.stringMatching(/^svc_sig_/));
    expect(created.channel).toMatchObject({ has_signing_secret: true, config: { require_signature: false } });
  });

  it("refuses an unknown tenant with exit 1 and the error envelope", async () => {
    const result = await cli(["channel", "create", "--tenant", randomUUID(), "--flow", "echo", "--db", db]);
    expect(result.code).toBe(1);
    expect(result.out).toEqual([]);
    expect(result.error().error.code).toBe("validation_error");
    expect(result.error().error.message).toMatch(/tenant/i);
  });

  it("refuses an unknown flow, naming the registered ones", async () => {
    const result = await cli(["channel", "create", "--tenant", tenantId, "--flow", "nope", "--db", db]);
    expect(result.code).toBe(1);
    const { error } = result.error();
    expect(error.code).toBe("validation_error");
    expect(error.message).toContain('"nope"');
    expect(error.message).toContain("echo");
  });

  it("refuses an allowed origin that is not an exact origin", async () => {
    const result = await cli(["channel", "create", "--tenant", tenantId, "--flow", "echo", "--allowed-origin", "https://app.example.com/path", "--db", db]);
    expect(result.code).toBe(1);
    expect(result.error().error.code).toBe("validation_error");
  });
});

describe("channelkit channel update, rotate-key, rotate-signing-secret", () => {
  let db: string;
  let tenantId: string;
  beforeAll(async () => {
    db = tempDb();
    tenantId = await tenant(db);
  });

  it("changes state, environment, allowed origins and default stream", async () => {
    const { channel: created } = await channel(db, tenantId, "--allowed-origin", "https://old.example.com");
    const update = async (...args: string[]) => {
      const result = await cli(["channel", "update", created.id, "--db", db, ...args]);
      expect(result.err).toEqual([]);
      expect(result.code).toBe(0);
      return result.json().channel as Record<string, unknown>;
    };

    expect(await update("--state", "inactive")).toMatchObject({ id: created.id, state: "inactive" });
    expect(await update("--state", "active", "--environment", "dev")).toMatchObject({ state: "active", environment: "dev" });
    expect(await update("--allowed-origin", "https://a.example.com", "--allowed-origin", "https://b.example.com")).toMatchObject({
      allowed_origins: ["https://a.example.com", "https://b.example.com"],
    });
    expect(await update("--default-stream", "true")).toMatchObject({ default_stream: true });
    const last = await update("--default-stream", "false");
    expect(last).toMatchObject({ default_stream: false, environment: "dev", allowed_origins: ["https://a.example.com", "https://b.example.com"] });
    expect(Date.parse(last.updated_at as string)).toBeGreaterThanOrEqual(Date.parse(created.updated_at as string));

    const storage = sqlite(db);
    try {
      expect(await storage.findChannel(created.id)).toMatchObject({
        state: "active",
        environment: "dev",
        allowedOrigins: ["https://a.example.com", "https://b.example.com"],
        defaultStream: false,
      });
    } finally {
      await storage.close();
    }
  });

  it("returns a one-time signing secret when require-signature goes from false to true", async () => {
    const { channel: created } = await channel(db, tenantId);
    const on = await cli(["channel", "update", created.id, "--require-signature", "true", "--db", db]);
    expect(on.code).toBe(0);
    expect(on.json()).toEqual({
      channel: expect.objectContaining({ has_signing_secret: true, config: { require_signature: true } }),
      signing_secret: expect.any(String),
    });
    const again = await cli(["channel", "update", created.id, "--require-signature", "true", "--db", db]);
    expect(again.json().signing_secret).toBeUndefined();
    const off = await cli(["channel", "update", created.id, "--require-signature", "false", "--db", db]);
    // Turning the check off keeps the stored secret; turning it on again keeps it too, and
    // does not show it again: a secret is shown once, when it is made.
    expect(off.json().channel).toMatchObject({ has_signing_secret: true, config: { require_signature: false } });
    const back = await cli(["channel", "update", created.id, "--require-signature", "true", "--db", db]);
    expect(back.json().signing_secret).toBeUndefined();
    expect(back.json().channel).toMatchObject({ has_signing_secret: true, config: { require_signature: true } });
  });

  it("refuses to update an unknown channel or an archived one", async () => {
    const unknown = await cli(["channel", "update", randomUUID(), "--state", "inactive", "--db", db]);
    expect(unknown.code).toBe(1);
    expect(unknown.error().error.code).toBe("channel_not_found");

    const { channel: created } = await channel(db, tenantId);
    expect((await cli(["channel", "update", created.id, "--state", "archived", "--db", db])).code).toBe(0);
    const archived = await cli(["channel", "update", created.id, "--state", "active", "--db", db]);
    expect(archived.code).toBe(1);
    expect(archived.error().error.code).toBe("channel_archived");
    expect((await cli(["channel", "rotate-key", created.id, "--db", db])).error().error.code).toBe("channel_archived");
  });

  it("rotate-key revokes the old key and issues one with the same prefix and environment", async () => {
    const created = await channel(db, tenantId, "--environment", "staging");
    const result = await cli(["channel", "rotate-key", created.channel.id, "--db", db]);
    expect(result.code).toBe(0);
    const rotated = result.json();
    expect(rotated).toEqual({
      api_key: expect.stringMatching(/^svc_test_[0-9A-Za-z]{40,}$/),
      channel: { id: created.channel.id, api_key_hint: `svc_test_****${rotated.api_key.slice(-4)}` },
    });
    expect(rotated.api_key).not.toBe(created.api_key);

    const storage = sqlite(db);
    try {
      const old = await storage.findKeyByHash(await hashApiKey(created.api_key));
      const fresh = await storage.findKeyByHash(await hashApiKey(rotated.api_key));
      expect(old?.key.revokedAt).not.toBeNull();
      expect(fresh?.key).toMatchObject({ revokedAt: null, environment: "staging", prefix: "svc_test_" });
      expect(fresh?.channel.apiKeyHint).toBe(rotated.channel.api_key_hint);
    } finally {
      await storage.close();
    }
  });

  it("rotate-signing-secret replaces the stored secret", async () => {
    const created = await channel(db, tenantId, "--require-signature");
    const result = await cli(["channel", "rotate-signing-secret", created.channel.id, "--db", db]);
    expect(result.code).toBe(0);
    const rotated = result.json();
    expect(rotated).toEqual({ signing_secret: expect.any(String), channel: { id: created.channel.id, has_signing_secret: true } });
    expect(rotated.signing_secret).not.toBe(created.signing_secret);
    const storage = sqlite(db);
    try {
      const sealed = (await storage.findChannel(created.channel.id))?.signingSecretEncrypted ?? "";
      expect(await createSecretBox(MASTER_KEY).decrypt(sealed)).toBe(rotated.signing_secret);
    } finally {
      await storage.close();
    }
    const unknown = await cli(["channel", "rotate-signing-secret", randomUUID(), "--db", db]);
    expect(unknown.code).toBe(1);
    expect(unknown.error().error.code).toBe("channel_not_found");
  });
});

describe("channelkit tenant list, channel list, channel show", () => {
  it("list tenants and channels and show one as JSON, oldest first, never a key or a secret", async () => {
    const db = tempDb();
    expect((await cli(["tenant", "list", "--db", db])).json()).toEqual({ tenants: [] });
    expect((await cli(["channel", "list", "--db", db])).json()).toEqual({ channels: [] });
    const acme = (await cli(["tenant", "create", "--name", "Acme", "--db", db])).json().tenant;
    const globex = (await cli(["tenant", "create", "--name", "Globex", "--db", db])).json().tenant;
    const tenants = (await cli(["tenant", "list", "--db", db])).json().tenants as { id: string }[];
    expect(tenants).toHaveLength(2);
    expect(tenants).toEqual(expect.arrayContaining([acme, globex]));

    const api = await channel(db, acme.id, "--require-signature", "--name", "Support");
    const hook = await channel(db, acme.id, "--type", "webhook");
    const other = await channel(db, globex.id);
    const shown = await cli(["channel", "show", api.channel.id, "--db", db]);
    expect(shown.code).toBe(0);
    expect(shown.json()).toEqual({ channel: api.channel });

    const listed = (await cli(["channel", "list", "--tenant", acme.id, "--db", db])).json().channels as { id: string }[];
    expect(listed.map((c) => c.id).sort()).toEqual([api.channel.id, hook.channel.id].sort());
    expect(listed.find((c) => c.id === hook.channel.id)).toEqual(hook.channel);
    const all = (await cli(["channel", "list", "--db", db])).json().channels as { id: string }[];
    expect(all.map((c) => c.id).sort()).toEqual([api.channel.id, hook.channel.id, other.channel.id].sort());
    const printed = JSON.stringify(all);
    for (const secret of [api.api_key, api.signing_secret, hook.api_key, hook.signing_secret, other.api_key]) expect(printed).not.toContain(secret);

    const unknown = await cli(["channel", "list", "--tenant", randomUUID(), "--db", db]);
    expect(unknown.code).toBe(1);
    expect(unknown.error().error).toMatchObject({ code: "validation_error", message: expect.stringContaining("No tenant exists") });
    const missing = await cli(["channel", "show", randomUUID(), "--db", db]);
    expect(missing.code).toBe(1);
    expect(missing.error().error.code).toBe("channel_not_found");
    expect((await cli(["channel", "show", "--db", db])).code).toBe(2);
    expect((await cli(["tenant", "list", "extra", "--db", db])).code).toBe(2);
  });
});

describe("channelkit admin-token", () => {
  const key = new TextEncoder().encode(JWT_SECRET);
  /** A database that does not exist: the tenants are not checked (a warning says so). */
  const nowhere = ["--db", join(tmpdir(), `channelkit-none-${randomUUID()}.db`)];

  it("signs an HS256 token for the tenant, valid for an hour by default", async () => {
    const result = await cli(["admin-token", "--tenant", "t-1", ...nowhere]);
    expect(result.code).toBe(0);
    const { payload, protectedHeader } = await jwtVerify(result.json().token, key);
    expect(protectedHeader.alg).toBe("HS256");
    expect(payload.tenant_ids).toEqual(["t-1"]);
    expect(payload.organization_id).toBeUndefined();
    expect((payload.exp ?? 0) - (payload.iat ?? 0)).toBe(3600);
    await expect(jwtVerify(result.json().token, new TextEncoder().encode("another secret"))).rejects.toThrow();
  });

  it("adds --tenants, --org and --expires", async () => {
    const result = await cli(["admin-token", "--tenant", "t-1", "--tenants", "t-2, t-1,t-3", "--org", "org-9", "--expires", "30m", ...nowhere]);
    const { payload } = await jwtVerify(result.json().token, key);
    expect(payload.tenant_ids).toEqual(["t-1", "t-2", "t-3"]);
    expect(payload.organization_id).toBe("org-9");
    expect((payload.exp ?? 0) - (payload.iat ?? 0)).toBe(1800);
  });

  it("needs CHANNELKIT_ADMIN_JWT_SECRET (an unset one is said so, without the usage) and a sane --expires", async () => {
    const noSecret = await cli(["admin-token", "--tenant", "t-1", ...nowhere], { CHANNELKIT_ADMIN_JWT_SECRET: undefined });
    expect(noSecret.code).toBe(1);
    expect(noSecret.error().error).toEqual({
      code: "environment_error",
      message: "CHANNELKIT_ADMIN_JWT_SECRET is not set: admin tokens are signed with it. Set it to the server's value (a new one: openssl rand -hex 32)",
    });
    const badExpiry = await cli(["admin-token", "--tenant", "t-1", "--expires", "soon", ...nowhere]);
    expect(badExpiry.code).toBe(2);
    expect(badExpiry.err.join("\n")).toContain("--expires");
  });

  it("refuses a tenant the database does not have; signs without a check, saying so, when there is no database here", async () => {
    const db = tempDb();
    const tenantId = await tenant(db);
    expect((await cli(["admin-token", "--tenant", tenantId, "--db", db])).code).toBe(0);
    const unknown = randomUUID();
    const refused = await cli(["admin-token", "--tenant", tenantId, "--tenants", unknown, "--db", db]);
    expect(refused.code).toBe(1);
    expect(refused.out).toEqual([]);
    expect(refused.error().error).toEqual({
      code: "validation_error",
      message: `No tenant exists with id ${unknown}: no admin token was signed (npx channelkit tenant list shows the tenants).`,
    });
    const unchecked = await cli(["admin-token", "--tenant", unknown, ...nowhere]);
    expect(unchecked.code).toBe(0);
    expect(unchecked.err).toEqual([expect.stringMatching(/^channelkit: WARNING: the tenants were not checked: no database at /)]);
  });
});

describe("channelkit channel update --widget", () => {
  const db = tempDb();

  it("sets the widget settings from JSON; bad JSON is a usage error, a bad setting a validation error", async () => {
    const tenantId = await tenant(db);
    const { channel: created } = await channel(db, tenantId, "--mode", "public");
    const widget = { theme: { position: "bottom-left" }, strings: { en_US: { title: "Help" } } };
    const set = await cli(["channel", "update", created.id, "--widget", JSON.stringify(widget), "--db", db]);
    expect(set.code).toBe(0);
    expect(set.json().channel.widget).toEqual(widget);
    const badJson = await cli(["channel", "update", created.id, "--widget", "{position:left}", "--db", db]);
    expect(badJson.code).toBe(2);
    expect(badJson.err.join("\n")).toContain("--widget takes JSON");
    const badSetting = await cli(["channel", "update", created.id, "--widget", '{"theme":{"position":"top"}}', "--db", db]);
    expect(badSetting.code).toBe(1);
    expect(badSetting.error().error.code).toBe("validation_error");
  });
});

describe("channelkit channel update --livechat", () => {
  const db = tempDb();

  it("sets the status messages and the wait timeout as the admin PATCH takes them; a bad value is refused", async () => {
    const tenantId = await tenant(db);
    const { channel: created } = await channel(db, tenantId);
    const livechat = { status_messages: { livechat_waiting: "Hold on, an agent is coming." }, wait_timeout_seconds: 300 };
    const set = await cli(["channel", "update", created.id, "--livechat", JSON.stringify(livechat), "--db", db]);
    expect(set.code).toBe(0);
    expect(set.json().channel.livechat).toEqual(livechat);
    const limited = await cli(["channel", "update", created.id, "--run-timeout-seconds", "60", "--db", db]);
    expect(limited.json().channel.run_timeout_seconds).toBe(60);
    expect((await cli(["channel", "update", created.id, "--run-timeout-seconds", "0", "--db", db])).code).toBe(2);
    const resumable = await cli(["channel", "update", created.id, "--resumable-streams", "true", "--db", db]);
    expect(resumable.json().channel.resumable_streams).toBe(true);
    expect((await cli(["channel", "update", created.id, "--resumable-streams", "false", "--db", db])).json().channel.resumable_streams).toBe(false);
    expect((await cli(["channel", "update", created.id, "--resumable-streams", "yes", "--db", db])).code).toBe(2);
    const unknown = await cli(["channel", "update", created.id, "--livechat", '{"timeout":3}', "--db", db]);
    expect(unknown.code).toBe(2);
    expect(unknown.err.join("\n")).toContain("--livechat takes status_messages and wait_timeout_seconds, not timeout");
    const bad = await cli(["channel", "update", created.id, "--livechat", '{"wait_timeout_seconds":0}', "--db", db]);
    expect(bad.code).toBe(1);
    expect(bad.error().error.code).toBe("validation_error");
  });
});

describe("channelkit serve --livechat", () => {
  it("waits for an agent of the inbox by default; with off, a handover is unavailable and the bot keeps the conversation", async () => {
    for (const [args, expected] of [
      [[], { status: "pending", livechat_mode: "livechat_waiting", mode: "livechat_waiting" }],
      [["--livechat", "off"], { status: "success", livechat_mode: null, mode: "livechat_unavailable" }],
    ] as const) {
      const db = tempDb();
      const tenantId = await tenant(db);
      const { api_key } = await channel(db, tenantId, "--flow", "handover");
      const server = await startServe([...args, "--db", db, "--port", "0"], { CHANNELKIT_SECRET_KEY: MASTER_KEY });
      const run = await fetch(`${server.url}/public/v1/api/execute`, {
        method: "POST",
        headers: { Authorization: `Bearer ${api_key}`, "Content-Type": "application/json" },
        body: JSON.stringify({ payload: "agent please" }),
      }).then((response) => response.json() as Promise<any>);
      expect([run.status, run.output.metadata.livechat_mode]).toEqual([expected.status, expected.livechat_mode]);
      const history = await fetch(`${server.url}/public/v1/api/conversations/${run.conversation_id}/messages`, {
        headers: { Authorization: `Bearer ${api_key}` },
      }).then((response) => response.json() as Promise<any>);
      expect(history.mode).toBe(expected.mode);
    }
    // A subscription never ends by itself: SIGTERM still stops the server at once, ending it.
    const db = tempDb();
    const { api_key } = await channel(db, await tenant(db), "--flow", "handover");
    const server = await startServe(["--db", db, "--port", "0"], { CHANNELKIT_SECRET_KEY: MASTER_KEY });
    const run = await fetch(`${server.url}/public/v1/api/execute`, {
      method: "POST",
      headers: { Authorization: `Bearer ${api_key}`, "Content-Type": "application/json" },
      body: JSON.stringify({ payload: "agent please" }),
    }).then((response) => response.json() as Promise<any>);
    const events = await fetch(`${server.url}/public/v1/api/conversations/${run.conversation_id}/events`, { headers: { Authorization: `Bearer ${api_key}` } });
    const body = events.text();
    const signalled = Date.now();
    server.child.kill("SIGTERM");
    expect(await server.exited).toBe(0);
    expect(Date.now() - signalled).toBeLessThan(3000);
    expect(await body).toContain('"mode":"livechat_waiting"');
    const bad = await cli(["serve", "--livechat", "zendesk", "--db", tempDb()]);
    expect(bad.code).toBe(2);
    expect(bad.err.join("\n")).toContain("--livechat takes one of inbox, bridge, off");
    // The bridge: a handover reaches the help desk's receiver, signed.
    const received: { type: string; signature: string }[] = [];
    const desk = createServer((request, response) => {
      let body = "";
      request.on("data", (chunk) => {
        body += chunk;
      });
      request.on("end", () => {
        received.push({ type: JSON.parse(body).type, signature: String(request.headers["x-channelkit-signature"]) });
        response.end();
      });
    });
    await new Promise<void>((resolve) => desk.listen(0, "127.0.0.1", resolve));
    try {
      const bridged = tempDb();
      const { api_key: bridgedKey } = await channel(bridged, await tenant(bridged), "--flow", "handover");
      const deskUrl = `http://127.0.0.1:${(desk.address() as AddressInfo).port}/events`;
      const bridge = await startServe(["--livechat", "bridge", "--db", bridged, "--port", "0"], {
        CHANNELKIT_SECRET_KEY: MASTER_KEY,
        CHANNELKIT_LIVECHAT_BRIDGE_URL: deskUrl,
        CHANNELKIT_LIVECHAT_BRIDGE_SECRET: "desk-secret-0123456789",
      });
      await fetch(`${bridge.url}/public/v1/api/execute`, {
        method: "POST",
        headers: { Authorization: `Bearer ${bridgedKey}`, "Content-Type": "application/json" },
        body: JSON.stringify({ payload: "agent please" }),
      });
      for (let i = 0; i < 100 && received.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(received).toEqual([{ type: "handover", signature: expect.stringMatching(/^t=\d+,v1=[0-9a-f]{64}$/) }]);
    } finally {
      desk.closeAllConnections();
      desk.close();
    }
    const unset = await cli(["serve", "--livechat", "bridge", "--db", tempDb()], { CHANNELKIT_LIVECHAT_BRIDGE_URL: undefined });
    expect(unset.code).toBe(2);
    expect(unset.err.join("\n")).toContain("--livechat bridge needs CHANNELKIT_LIVECHAT_BRIDGE_URL and CHANNELKIT_LIVECHAT_BRIDGE_SECRET");
  });
});

describe("channelkit serve: SIGTERM drains", () => {
  /** Starts a slow stream (5 s: 50 words 100 ms apart) on a new server, and reads its first event. */
  async function slowStream(args: string[]) {
    const db = tempDb();
    const { api_key } = await channel(db, await tenant(db), "--flow", "slow");
    const server = await startServe(["--db", db, "--port", "0", ...args], { CHANNELKIT_SECRET_KEY: MASTER_KEY });
    const response = await fetch(`${server.url}/public/v1/api/execute`, {
      method: "POST",
      headers: { Authorization: `Bearer ${api_key}`, "Content-Type": "application/json" },
      body: JSON.stringify({ payload: "go", stream: true }),
    });
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    const runId = /"run_id":"([^"]+)"/.exec(first)?.[1] as string;
    /** The rest of the stream, to its end. */
    const rest = async () => {
      let text = first;
      for (;;) {
        const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
        if (done) return text;
        text += new TextDecoder().decode(value);
      }
    };
    const status = async () => {
      const storage = sqlite(db);
      try {
        return (await storage.findRun(runId))?.status;
      } finally {
        await storage.close();
      }
    };
    return { server, rest, status };
  }

  it("lets a run in flight finish within --drain-ms, stores the rest cancelled, exits 0 within the bound", async () => {
    for (const [drain, signal, outcome] of [
      ["10000", "SIGTERM", "success"],
      ["300", "SIGINT", "cancelled"],
    ] as const) {
      const { server, rest, status } = await slowStream(["--drain-ms", drain]);
      const signalled = Date.now();
      server.child.kill(signal);
      // Stopped accepting at once: a new connection is refused while the run drains.
      await new Promise((resolve) => setTimeout(resolve, 100));
      await expect(fetch(`${server.url}/public/widget/config`)).rejects.toThrow();
      const text = await rest();
      expect(await server.exited).toBe(0);
      const took = Date.now() - signalled;
      expect(await status(), drain).toBe(outcome);
      if (outcome === "success") {
        // The stream ran to its end (under 5 s after the signal), well within the drain.
        expect(text).toContain('"type":"finish"');
        expect(took).toBeLessThan(5500);
      } else {
        // Cut at the end of the drain, long before its last word; the process exits soon after.
        expect(text).toContain('"delta":"word1 "');
        expect(text).not.toContain("word50");
        expect(took).toBeGreaterThanOrEqual(300);
        expect(took).toBeLessThan(300 + 2000);
      }
      expect(server.lines).toContain(`${signal}: stopping; runs in flight have ${drain} ms to finish (--drain-ms)`);
    }
  }, 30_000);

  it("a second signal stops at once, exit 1 with the envelope", async () => {
    const { server, status } = await slowStream(["--drain-ms", "10000"]);
    server.child.kill("SIGTERM");
    await new Promise((resolve) => setTimeout(resolve, 200));
    const signalled = Date.now();
    server.child.kill("SIGINT");
    expect(await server.exited).toBe(1);
    expect(Date.now() - signalled).toBeLessThan(1000);
    const { error } = JSON.parse(server.stderr().trim().split("\n").at(-1) as string) as { error: { code: string; message: string } };
    expect(error.code).toBe("shutdown_interrupted");
    expect(error.message).toMatch(/^SIGINT again: stopped at once/);
    // Left as after a crash, with no outcome: on SQLite a run that is not recorded has no row
    // before its outcome. Its conversation's next run takes its turn over once its lease
    // lapses and stores it cancelled (multi-instance.test.ts, "a crash on SQLite").
    expect(await status()).toBeUndefined();
  }, 30_000);

  it("is bounded: a close that never ends (a storage that hangs) stops the process after --drain-ms and 5 s more, exit 1", async () => {
    const dir = await makeApp({
      "channelkit.config.mjs": `import { demoFlows } from "@channelkit/core/demo";
import { sqlite } from "@channelkit/kysely";

const storage = sqlite(process.env.APP_DB);
// A storage whose close() never ends, for serve only (the other commands close theirs).
const hanging = new Proxy(storage, {
  get(target, name) {
    if (name === "close" && process.argv.includes("serve")) return () => new Promise(() => {});
    const value = Reflect.get(target, name, target);
    return typeof value === "function" ? value.bind(target) : value;
  },
});
export default { storage: hanging, flows: demoFlows };
`,
    });
    apps.push(dir);
    const env = { CHANNELKIT_SECRET_KEY: MASTER_KEY, APP_DB: join(dir.path, "app.db") };
    const server = await startServe(["--port", "0", "--drain-ms", "200"], env, 15_000, { cwd: dir.path });
    const signalled = Date.now();
    server.child.kill("SIGTERM");
    expect(await server.exited).toBe(1);
    const took = Date.now() - signalled;
    expect(took).toBeGreaterThanOrEqual(200 + 5000);
    expect(took).toBeLessThan(200 + 5000 + 1500);
    const { error } = JSON.parse(server.stderr().trim().split("\n").at(-1) as string) as { error: { code: string; message: string } };
    expect(error.code).toBe("shutdown_timeout");
    expect(error.message).toMatch(/^the service did not close within --drain-ms \(200 ms\) and 5000 ms more/);
  }, 30_000);
});

describe("channelkit audit", () => {
  const db = tempDb();

  it("lists what the command did, as the actor cli, newest first, a page at a time; refusals included", async () => {
    const tenantId = await tenant(db);
    const { channel: created } = await channel(db, tenantId);
    expect((await cli(["channel", "update", created.id, "--allowed-origin", "https://a.example", "--db", db])).code).toBe(0);
    expect((await cli(["channel", "rotate-key", created.id, "--db", db])).code).toBe(0);
    expect((await cli(["channel", "update", created.id, "--state", "archived", "--db", db])).code).toBe(0);
    expect((await cli(["channel", "rotate-key", created.id, "--db", db])).code).toBe(1);

    const result = await cli(["audit", "--tenant", tenantId, "--db", db]);
    expect(result.code).toBe(0);
    const { events, next_cursor } = result.json();
    expect(next_cursor).toBeNull();
    expect(events.map((e: Record<string, unknown>) => [e.operation, e.outcome, e.error_code, e.actor, e.via])).toEqual([
      ["rotate_key", "failure", "channel_archived", "cli", "service"],
      ["update_channel", "success", null, "cli", "service"],
      ["rotate_key", "success", null, "cli", "service"],
      ["update_channel", "success", null, "cli", "service"],
      ["create_channel", "success", null, "cli", "service"],
      ["create_tenant", "success", null, "cli", "service"],
    ]);
    expect(events[3].changes).toEqual({ allowed_origins: { from: [], to: ["https://a.example"] } });
    expect(events[1].changes).toEqual({ state: { from: "active", to: "archived" } });

    const first = (await cli(["audit", "--tenant", tenantId, "--channel", created.id, "--limit", "2", "--db", db])).json();
    expect(first.events.map((e: { id: string }) => e.id)).toEqual([events[0].id, events[1].id]);
    const second = (await cli(["audit", "--tenant", tenantId, "--channel", created.id, "--limit", "2", "--cursor", first.next_cursor, "--db", db])).json();
    expect(second.events.map((e: { id: string }) => e.id)).toEqual([events[2].id, events[3].id]);

    const badLimit = await cli(["audit", "--limit", "0", "--db", db]);
    expect(badLimit.code).toBe(2);
    expect(badLimit.err.join("\n")).toContain("--limit takes an integer from 1 to 200");
    const badCursor = await cli(["audit", "--cursor", "nonsense", "--db", db]);
    expect(badCursor.code).toBe(1);
    expect(badCursor.error().error.code).toBe("validation_error");
  });
});

describe("channelkit: bad command lines exit 2 with a clear message", () => {
  const db = tempDb();

  it.each([
    [["frobnicate"], "Unknown command: frobnicate"],
    [
      ["channel", "update", "some-id", "--rate-limits", "{nope"],
      `--rate-limits takes JSON, e.g. '{"publishable_key":{"requests":600,"window_seconds":60}}', not "{nope"`,
    ],
    [["channel", "update", "some-id", "--livechat", "{nope"], `--livechat takes JSON, e.g. '{"wait_timeout_seconds":300}', not "{nope"`],
    [["channel", "delete", "x"], "Unknown command: channel delete"],
    [["tenant"], "Unknown command: tenant"],
    [["tenant", "create", "--name", "A", "--colour", "red"], "Unknown option '--colour'"],
    [["tenant", "create"], "--name is required"],
    [["channel", "create", "--flow", "echo"], "--tenant is required"],
    [
      ["channel", "create", "--tenant", "t", "--flow", "echo", "--environment", "production"],
      '--environment takes one of prod, dev, staging, not "production"',
    ],
    [["channel", "create", "--tenant", "t", "--flow", "echo", "--mode", "browser"], "--mode takes one of server, public"],
    // A type that is neither built in nor a plugin's is the admin's refusal, naming the registered ones (channel-types.test.ts).
    [
      ["channel", "create", "--tenant", "t", "--flow", "echo", "--type", ""],
      "--type takes a channel type: api, webhook, or one a plugin of the config registers",
    ],
    [["channel", "update", "some-id", "--default-stream", "yes"], '--default-stream takes true or false, not "yes"'],
    [["channel", "update", "some-id", "--state", "deleted"], "--state takes one of active, inactive, archived"],
    [["channel", "update", "some-id"], "at least one option"],
    [["channel", "update", "--state", "active"], "Missing argument: the channel ID"],
    [["channel", "rotate-key"], "Missing argument: the channel ID"],
    [["migrate", "extra"], "Unexpected argument 'extra'"],
    [["admin-token"], "--tenant is required"],
    [["serve", "--port", "http"], "--port takes a port number"],
    [["serve", "--port", "70000"], "--port takes a port number"],
    [["serve", "--port", ""], "--port takes a port number"],
    [["serve", "--port=-1"], "--port takes a port number"],
    [["serve", "--turn-lease-ms", "soon"], '--turn-lease-ms takes a number of milliseconds, 100 or more, not "soon"'],
    [["serve", "--turn-lease-ms", "50"], "--turn-lease-ms takes a number of milliseconds, 100 or more"],
  ])("%j", async (args, message) => {
    const result = await cli([...args, "--db", db]);
    expect(result.code).toBe(2);
    expect(result.out).toEqual([]);
    // The envelope on the first line, then the usage.
    const [first, ...rest] = result.err.join("\n").split("\n");
    const { error } = JSON.parse(first as string) as { error: { code: string; message: string } };
    expect(error.code).toBe("usage_error");
    expect(error.message).toContain(message);
    expect(rest.join("\n")).toContain("Usage: channelkit <command>");
  });
});

describe("channelkit: an unknown command is named alone", () => {
  it.each([
    [["frobnicate"], "Unknown command: frobnicate"],
    [["channel", "delete", "x"], "Unknown command: channel delete"],
    [["--db", "x.db", "tenant"], "Unknown command: tenant"],
  ])("%j", async (args, message) => {
    const result = await cli([...args, "--db", tempDb()]);
    expect(result.code).toBe(2);
    const { error } = JSON.parse(result.err.join("\n").split("\n")[0] as string) as { error: { message: string } };
    expect(error.message).toBe(message);
  });
});

describe("channelkit: every error is the envelope, without a doubled prefix", () => {
  /** The one line of stderr as the envelope: the prefix is never in its message. */
  function envelopeOf(err: string[]): { code: string; message: string } {
    expect(err).toHaveLength(1);
    const { error } = JSON.parse(err[0] as string) as { error: { code: string; message: string } };
    expect(error.message).not.toMatch(/^channelkit: /);
    return error;
  }

  it("a library error that starts with the prefix (a failed migration)", async () => {
    const db = tempDb();
    // A table of the first migration, made outside it: the migration fails on it.
    const storage = sqlite(db);
    await storage.db.schema.createTable("tenants").addColumn("id", "text").execute();
    await storage.close();
    const result = await cli(["migrate", "--db", db]);
    expect(result.code).toBe(1);
    expect(result.out).toEqual([]);
    expect(envelopeOf(result.err)).toEqual({ code: "database_error", message: 'migration 0001_initial failed: table "tenants" already exists' });
  });

  it("an error without it (a database that cannot be opened)", async () => {
    const result = await cli(["migrate", "--db", join(tmpdir(), `channelkit-missing-${randomUUID()}`, "x.db")]);
    expect(result.code).toBe(1);
    expect(envelopeOf(result.err)).toEqual({ code: "database_error", message: "Cannot open database because the directory does not exist" });
  });

  it("a warning is a log line with the prefix once, not an error", async () => {
    const warned = await cli(["tenant", "create", "--name", "A", "--db", tempDb()], { CHANNELKIT_SECRET_KEY: undefined });
    expect(warned.code).toBe(0);
    expect(warned.err).toHaveLength(1);
    expect(warned.err[0]).toMatch(/^channelkit: WARNING: no master key configured/);
    expect(warned.err[0]).not.toMatch(/^channelkit: channelkit:/);
  });
});

describe("channelkit serve --demo (built binary, end to end)", () => {
  beforeAll(() => ensureBuilt(), 120_000);
  afterAll(() => killAll());

  it("prints a working curl command for a fresh database, on the real port of --port 0", async () => {
    const db = tempDb();
    const started = await startServe(["--demo", "--db", db, "--port", "0"], { CHANNELKIT_SECRET_KEY: MASTER_KEY, NODE_ENV: "development" });
    const { url, lines, exited } = started;

    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(url.endsWith(":0")).toBe(false);
    const curl = /curl -s (\S+) -H 'Authorization: Bearer (svc_\w+)' -H 'Content-Type: application\/json' -d '(.+)'$/.exec(
      lines.find((line) => line.includes("curl -s")) ?? "",
    );
    expect(curl, lines.join("\n")).not.toBeNull();
    const [, endpoint, key, body] = curl as unknown as [string, string, string, string];
    expect(endpoint).toBe(`${url}/public/v1/api/execute`);

    const response = await fetch(endpoint, {
      method: "POST",
      headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
      body,
    });
    expect(response.status).toBe(200);
    const document = (await response.json()) as { status: string; output: { messages: { role: string; content: string }[] } };
    expect(document.status).toBe("success");
    expect(document.output.messages).toEqual([{ role: "assistant", content: "Echo: Hello, channelkit!" }]);

    // The streamed variant it prints works too.
    const streamed = /curl -N (\S+) -H 'Authorization: Bearer (svc_\w+)' -H 'Content-Type: application\/json' -d '(.+)'$/.exec(
      lines.find((line) => line.includes("curl -N")) ?? "",
    );
    expect(streamed).not.toBeNull();
    const sse = await fetch(streamed?.[1] as string, {
      method: "POST",
      headers: { Authorization: `Bearer ${streamed?.[2]}`, "Content-Type": "application/json" },
      body: streamed?.[3] as string,
    });
    expect(sse.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const events = (await sse.text())
      .split("\n\n")
      .filter(Boolean)
      .map((frame) => JSON.parse(frame.replace(/^data: /, "")) as { type: string; delta?: string });
    expect(events[0]?.type).toBe("data-run");
    expect(events.at(-1)?.type).toBe("finish");
    expect(events.flatMap((e) => (e.type === "text-delta" ? [e.delta] : [])).join("")).toBe("Echo: Hello, channelkit!");

    started.child.kill("SIGTERM");
    expect(await exited).toBe(0);
  });

  it("serves a page with the widget at / and the widget's script; a restart on another port finds the widget channel again", async () => {
    const db = tempDb();
    const env = { CHANNELKIT_SECRET_KEY: MASTER_KEY };
    const first = await startServe(["--demo", "--db", db, "--port", "0"], env);
    const line = first.lines.find((l) => l.startsWith("Widget: open")) ?? "";
    expect(line, first.lines.join("\n")).toContain(`${first.url}/`);
    const key = /publishable key (svc_pub_\w+)/.exec(line)?.[1] as string;
    expect(first.lines).toContain(`  <script src="${first.url}/public/widget/widget.js" data-key="${key}" defer></script>`);
    const page = await fetch(`${first.url}/`);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(await page.text()).toContain(`<script src="/public/widget/widget.js" data-key="${key}" defer></script>`);
    const script = await fetch(`${first.url}/public/widget/widget.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get("content-type")).toMatch(/javascript/);
    const config = await fetch(`${first.url}/public/widget/config`, { headers: { authorization: `Bearer ${key}`, origin: first.url } });
    expect(config.status).toBe(200);
    first.child.kill("SIGTERM");
    await first.exited;

    const second = await startServe(["--demo", "--db", db, "--port", "0"], env);
    expect(
      second.lines.find((l) => l.startsWith("Widget: open")),
      second.lines.join("\n"),
    ).toContain(key);
    // No key again (only its hash is stored), but the channels' ids and a rotate-key line that works as printed.
    const { channels } = (await cli(["channel", "list", "--db", db])).json() as { channels: { id: string; name: string }[] };
    const echo = channels.find((c) => c.name === "Demo echo");
    expect(second.lines).toContain(
      `Demo: the database already has tenants; no new key was created. Its channels (all of them: npx channelkit channel list --db ${db}):`,
    );
    for (const c of channels) expect(second.lines.some((line) => line.startsWith(`  ${c.id}  flow echo, api, `))).toBe(true);
    const rotate = second.lines.find((line) => line.startsWith("  npx channelkit channel rotate-key "));
    expect(rotate).toBe(`  npx channelkit channel rotate-key ${echo?.id} --db ${db}`);
    const rotated = await cli((rotate as string).trim().split(" ").slice(2));
    expect(rotated.code).toBe(0);
    expect(rotated.json().channel.id).toBe(echo?.id);
    expect(await (await fetch(`${second.url}/`)).text()).toContain(key);
    const again = await fetch(`${second.url}/public/widget/config`, {
      headers: { authorization: `Bearer ${key}`, origin: second.url.replace("127.0.0.1", "localhost") },
    });
    expect(again.status).toBe(200);
  });

  it("with CHANNELKIT_ADMIN_JWT_SECRET, serves the admin routes: the printed rotate-key line and a token from admin-token work", async () => {
    const db = tempDb();
    const env = { CHANNELKIT_SECRET_KEY: MASTER_KEY, CHANNELKIT_ADMIN_JWT_SECRET: JWT_SECRET };
    const { lines } = await startServe(["--demo", "--db", db, "--port", "0"], env);
    const oldKey = /Bearer (svc_live_\w+)/.exec(lines.find((line) => line.includes("curl -s")) ?? "")?.[1] as string;
    const rotate = /curl -s -X POST (\S+) -H 'Authorization: Bearer (\S+)' -H 'X-Tenant-ID: (\S+)'$/.exec(
      lines.find((line) => line.includes("rotate-key")) ?? "",
    );
    expect(rotate, lines.join("\n")).not.toBeNull();
    const [, endpoint, token, tenantId] = rotate as unknown as [string, string, string, string];
    const rotated = await fetch(endpoint, { method: "POST", headers: { Authorization: `Bearer ${token}`, "X-Tenant-ID": tenantId } });
    expect(rotated.status).toBe(200);
    const { api_key } = (await rotated.json()) as { api_key: string };
    const execute = (key: string) =>
      fetch(endpoint.replace(/\/api\/v1\/channels\/.*$/, "/public/v1/api/execute"), {
        method: "POST",
        headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
        body: JSON.stringify({ payload: "hi" }),
      });
    expect((await execute(oldKey)).status).toBe(401);
    expect((await execute(api_key)).status).toBe(200);

    // A token from the command, on the signing-secret route.
    const fresh = await cli(["admin-token", "--tenant", tenantId]);
    const secretRoute = endpoint.replace(/rotate-key$/, "rotate-signing-secret");
    const secret = await fetch(secretRoute, { method: "POST", headers: { Authorization: `Bearer ${fresh.json().token}`, "X-Tenant-ID": tenantId } });
    expect(secret.status).toBe(200);
    const events = (await cli(["audit", "--tenant", tenantId, "--db", db])).json().events;
    expect(events.slice(0, 2).map((e: Record<string, unknown>) => [e.operation, e.actor, e.via])).toEqual([
      ["rotate_signing_secret", `channelkit-cli:${tenantId}`, "http"],
      ["rotate_key", `channelkit-cli:${tenantId}`, "http"],
    ]);
  });

  it("a restart with CHANNELKIT_ADMIN_JWT_SECRET on an existing demo database prints a token, its tenant and a rotate-key line that works", async () => {
    const db = tempDb();
    const first = await startServe(["--demo", "--db", db, "--port", "0"], { CHANNELKIT_SECRET_KEY: MASTER_KEY });
    expect(first.lines.join("\n")).toContain("start with CHANNELKIT_ADMIN_JWT_SECRET=");
    first.child.kill("SIGTERM");
    await first.exited;
    const second = await startServe(["--demo", "--db", db, "--port", "0"], { CHANNELKIT_SECRET_KEY: MASTER_KEY, CHANNELKIT_ADMIN_JWT_SECRET: JWT_SECRET });
    const { channels } = (await cli(["channel", "list", "--db", db])).json() as { channels: { id: string; name: string; tenant_id: string }[] };
    const echo = channels.find((c) => c.name === "Demo echo") as { id: string; tenant_id: string };
    expect(second.lines, second.lines.join("\n")).toContain(
      `Admin: a token for tenant ${echo.tenant_id}, valid 1 h (more with: npx channelkit admin-token --tenant ${echo.tenant_id}). Rotate the key:`,
    );
    const rotate = /curl -s -X POST (\S+) -H 'Authorization: Bearer (\S+)' -H 'X-Tenant-ID: (\S+)'$/.exec(
      second.lines.find((line) => line.includes("/rotate-key ")) ?? "",
    ) as unknown as [string, string, string, string];
    expect(rotate[1]).toBe(`${second.url}/api/v1/channels/${echo.id}/rotate-key`);
    expect(rotate[3]).toBe(echo.tenant_id);
    const rotated = await fetch(rotate[1], { method: "POST", headers: { Authorization: `Bearer ${rotate[2]}`, "X-Tenant-ID": rotate[3] } });
    expect(rotated.status).toBe(200);
  });

  it("--log-format json: the service's warnings are JSON lines on stderr; answers carry X-Request-Id; a bad format is a usage error", async () => {
    const started = await startServe(["--db", tempDb(), "--port", "0", "--log-format", "json"], { CHANNELKIT_SECRET_KEY: undefined });
    const [warning] = started
      .stderr()
      .split("\n")
      .filter((line) => line.includes("no master key"));
    expect(JSON.parse(warning as string)).toMatchObject({ level: "warn", msg: expect.stringMatching(/^channelkit: WARNING: no master key configured/) });
    const answered = await fetch(`${started.url}/healthz`, { headers: { "x-request-id": "probe-1" } });
    expect(answered.headers.get("x-request-id")).toBe("probe-1");
    await expect(startServe(["--db", tempDb(), "--port", "0", "--log-format", "xml"])).rejects.toThrow(/--log-format takes one of json, pretty/);
  });

  it("--access-log: a line per answered request on stdout, in the --log-format; the --pg-* and timeout flags are checked", async () => {
    /** Resolves with the first stdout line of `started` matching `pattern`, once it is printed. */
    const printed = async (started: { lines: string[] }, pattern: RegExp) => {
      for (let waited = 0; waited < 5000; waited += 20) {
        const line = started.lines.find((candidate) => pattern.test(candidate));
        if (line !== undefined) return line;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      throw new Error(`no stdout line matching ${pattern}:\n${started.lines.join("\n")}`);
    };
    const pretty = await startServe(["--db", tempDb(), "--port", "0", "--access-log", "--headers-timeout-ms", "20000"], { CHANNELKIT_SECRET_KEY: MASTER_KEY });
    await fetch(`${pretty.url}/healthz?token=not-logged`, { headers: { "x-request-id": "access-1" } });
    const line = await printed(pretty, /access-1/);
    expect(line).toMatch(/^\d{4}-\d\d-\d\dT[\d:.]+Z GET \/healthz 200 [\d.]+ ms access-1 /);
    expect(line).not.toContain("not-logged");
    const json = await startServe(["--db", tempDb(), "--port", "0", "--access-log", "--log-format", "json"], { CHANNELKIT_SECRET_KEY: MASTER_KEY });
    await fetch(`${json.url}/public/v1/api/conversations/00000000-0000-4000-8000-000000000000/messages`, { headers: { "x-request-id": "access-2" } });
    expect(JSON.parse(await printed(json, /access-2/))).toMatchObject({
      request_id: "access-2",
      method: "GET",
      path: "/public/v1/api/conversations/00000000-0000-4000-8000-000000000000/messages",
      route: "/public/v1/api/conversations/:session_id/messages",
      status: 401,
      client_address: "127.0.0.1",
    });
    await expect(startServe(["--db", tempDb(), "--port", "0", "--pg-pool-size", "3"])).rejects.toThrow(/--pg-\* flags are for a Postgres --db/);
    await expect(startServe(["--db", tempDb(), "--port", "0", "--request-timeout-ms", "5"])).rejects.toThrow(/--request-timeout-ms takes an integer from 1000/);
  });

  it("refuses to start in production with --admin-dev-mode or a short admin secret; outside production a short secret is a warning", async () => {
    for (const [args, env, message] of [
      [["--admin-dev-mode"], { NODE_ENV: "production", CHANNELKIT_SECRET_KEY: MASTER_KEY }, "development mode (no JWT) is refused in production"],
      [[], { NODE_ENV: "production", CHANNELKIT_SECRET_KEY: MASTER_KEY, CHANNELKIT_ADMIN_JWT_SECRET: "short" }, "shorter than 32 characters"],
    ] as const) {
      await expect(startServe([...args, "--db", tempDb(), "--port", "0"], env)).rejects.toThrow(message);
    }
    const env = { CHANNELKIT_SECRET_KEY: MASTER_KEY, CHANNELKIT_ADMIN_JWT_SECRET: "short-secret" };
    const started = await startServe(["--db", tempDb(), "--port", "0"], env);
    expect(started.stderr()).toMatch(/WARNING: the admin JWT secret is shorter than 32 characters/);
    const token = await cli(["admin-token", "--tenant", "t-1", "--db", join(tmpdir(), `channelkit-none-${randomUUID()}.db`)], {
      CHANNELKIT_ADMIN_JWT_SECRET: "short-secret",
    });
    expect(token.code).toBe(0);
    expect(token.err.join("\n")).toMatch(/WARNING: CHANNELKIT_ADMIN_JWT_SECRET is shorter than 32 characters/);
    const response = await fetch(`${started.url}/api/v1/channels/${randomUUID()}`, {
      headers: { Authorization: `Bearer ${token.json().token}`, "X-Tenant-ID": "t-1" },
    });
    expect(response.status).toBe(404);
  });
});
