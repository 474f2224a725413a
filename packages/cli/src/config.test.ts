/**
 * The config file (issue 20, scope 1): an app's `channelkit.config.{mjs,ts}` gives the command
 * its storage, flows and plugins, as the app's own server has them. Each test makes an app in
 * a temporary directory (its `node_modules` a link to the monorepo's, so that it imports the
 * packages as an installed app does) and runs the built binary there.
 */
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defineFlow, memoryStorage, text } from "@channelkit/core";
import { defineConfig } from "./config.js";
import { ensureBuilt, killAll, makeApp, runCli, runCliJson, startServe, type TestApp } from "./test-process.js";

const ENV = { CHANNELKIT_SECRET_KEY: randomBytes(32).toString("hex") };
const apps: TestApp[] = [];

/** A new app directory with these files, importing the monorepo's packages. */
async function app(files: Record<string, string>): Promise<string> {
  const made = await makeApp(files);
  apps.push(made);
  return made.path;
}

beforeAll(() => ensureBuilt(), 120_000);
afterAll(async () => {
  await killAll();
  await Promise.all(apps.map((made) => made.remove()));
});

/** The `.mjs` config of an app: its own `support` flow on its own SQLite file. */
const MJS_CONFIG = `import { defineFlow, text } from "@channelkit/core";
import { sqlite } from "@channelkit/kysely";

const support = defineFlow({
  name: "support",
  async *run(ctx) {
    yield text(\`Support here, about: \${ctx.payload}\`);
    return { answered: true };
  },
});

export default { storage: sqlite(new URL("./app.db", import.meta.url).pathname), flows: [support] };
`;

async function execute(url: string, key: string, payload: string): Promise<{ status: string; output: { messages: { content: string }[] } }> {
  const response = await fetch(`${url}/public/v1/api/execute`, {
    method: "POST",
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: JSON.stringify({ payload }),
  });
  expect(response.status).toBe(200);
  return (await response.json()) as { status: string; output: { messages: { content: string }[] } };
}

describe("channelkit with a config file", () => {
  it("channelkit.config.mjs in the working directory: every command works on its storage and flows; serve runs its flow", async () => {
    const cwd = await app({ "channelkit.config.mjs": MJS_CONFIG });
    const options = { cwd };
    expect(await runCliJson(["migrate"], ENV, options)).toEqual({ migrated: true });
    const { tenant } = await runCliJson(["tenant", "create", "--name", "Acme"], ENV, options);
    expect((await runCliJson(["tenant", "list"], ENV, options)).tenants).toEqual([tenant]);

    // The host's flows, not the demo's: its own is accepted, a demo one refused, naming the host's.
    const created = await runCliJson(["channel", "create", "--tenant", tenant.id, "--flow", "support", "--environment", "prod"], ENV, options);
    expect(created.channel).toMatchObject({ tenant_id: tenant.id, flow: "support", environment: "prod" });
    const echo = await runCli(["channel", "create", "--tenant", tenant.id, "--flow", "echo"], ENV, options);
    expect(echo.code).toBe(1);
    expect(JSON.parse(echo.stderr)).toEqual({ error: { code: "validation_error", message: 'Unknown flow "echo". Registered flows: support.' } });

    const shown = await runCliJson(["channel", "show", created.channel.id], ENV, options);
    expect(shown).toEqual({ channel: created.channel });
    expect(await runCliJson(["channel", "list", "--tenant", tenant.id], ENV, options)).toEqual({ channels: [created.channel] });
    const updated = await runCliJson(["channel", "update", created.channel.id, "--name", "Help desk"], ENV, options);
    expect(updated.channel.name).toBe("Help desk");
    // The storage is the config's: --db would be another one, and is refused.
    const conflict = await runCli(["tenant", "list", "--db", "./other.db"], ENV, options);
    expect(conflict.code).toBe(2);
    expect(conflict.stderr.split("\n")[0]).toContain("--db cannot be used with channelkit.config.mjs");

    const server = await startServe(["--port", "0"], ENV, 15_000, options);
    expect(server.lines).toContain("channelkit.config.mjs: flows support");
    const run = await execute(server.url, created.api_key, "my invoice");
    expect(run.status).toBe("success");
    expect(run.output.messages).toEqual([{ role: "assistant", content: "Support here, about: my invoice" }]);
    const rotated = await runCliJson(["channel", "rotate-key", created.channel.id], ENV, options);
    expect((await execute(server.url, rotated.api_key, "again")).output.messages[0]?.content).toBe("Support here, about: again");
    server.child.kill("SIGTERM");
    expect(await server.exited).toBe(0);
  }, 60_000);

  it("a TypeScript config through --config, from another directory: an async default export, a flow imported from a .ts module, its own plugin served", async () => {
    const dir = await app({
      "src/flows.ts": `import { defineFlow, text, type Flow } from "@channelkit/core";

interface Ticket { subject: string }

export const triage: Flow = defineFlow({
  name: "triage",
  async *run(ctx) {
    const ticket: Ticket = { subject: String(ctx.payload) };
    yield text(\`Triaged: \${ticket.subject}\`);
    return { queue: "billing" as const };
  },
});
`,
      "config/channelkit.config.ts": `import { defineConfig, type ChannelkitConfig } from "@channelkit/cli";
import { definePlugin, defineRoute } from "@channelkit/core";
import { sqlite } from "@channelkit/kysely";
import { triage } from "../src/flows.js";

const health = definePlugin({
  id: "health",
  routes: [
    defineRoute({
      method: "GET",
      path: "/healthz",
      auth: "none",
      doc: {
        operationId: "health",
        summary: "Whether the server is up",
        tag: { name: "Health", description: "The app's health check." },
        responses: { 200: { description: "It is." } },
        errors: [],
      },
      handle: () => Response.json({ ok: true }),
    }),
  ],
});

export default defineConfig(async (): Promise<ChannelkitConfig> => ({
  storage: sqlite(new URL("../data.db", import.meta.url).pathname),
  flows: [triage],
  plugins: [health],
}));
`,
    });
    // From a directory without a config: --config names it.
    const options = { cwd: tmpdir() };
    const config = ["--config", join(dir, "config/channelkit.config.ts")];
    const { tenant } = await runCliJson(["tenant", "create", "--name", "Acme", ...config], ENV, options);
    const created = await runCliJson(["channel", "create", "--tenant", tenant.id, "--flow", "triage", ...config], ENV, options);
    expect(created.channel.flow).toBe("triage");
    const server = await startServe(["--port", "0", ...config], ENV, 15_000, options);
    const run = await execute(server.url, created.api_key, "refund");
    expect(run.output.messages[0]?.content).toBe("Triaged: refund");
    expect(await (await fetch(`${server.url}/healthz`)).json()).toEqual({ ok: true });
    // The command's own routes are there too: the admin routes (refusing without a token) and the widget's script.
    expect((await fetch(`${server.url}/api/v1/channels/${created.channel.id}`, { headers: { "X-Tenant-ID": tenant.id } })).status).toBe(401);
    expect((await fetch(`${server.url}/public/widget/widget.js`)).status).toBe(200);
    server.child.kill("SIGINT");
    expect(await server.exited).toBe(0);
  }, 60_000);

  it("a config without a storage takes --db; --demo is refused with a config", async () => {
    const cwd = await app({
      "channelkit.config.mjs": `import { defineFlow, text } from "@channelkit/core";
export default { flows: [defineFlow({ name: "faq", async *run() { yield text("FAQ"); } })] };
`,
    });
    const db = join(cwd, "chosen.db");
    const { tenant } = await runCliJson(["tenant", "create", "--name", "Acme", "--db", db], ENV, { cwd });
    expect((await runCliJson(["channel", "create", "--tenant", tenant.id, "--flow", "faq", "--db", db], ENV, { cwd })).channel.flow).toBe("faq");
    expect((await runCliJson(["channel", "list", "--db", db], ENV, { cwd })).channels).toHaveLength(1);
    const demo = await runCli(["serve", "--demo", "--port", "0", "--db", db], ENV, { cwd });
    expect(demo.code).toBe(2);
    expect(JSON.parse(demo.stderr.split("\n")[0] as string).error.message).toContain(
      "--demo serves the demo flows: it cannot be used with channelkit.config.mjs",
    );
  }, 60_000);

  it("a config that fails to load or exports something wrong: config_error naming the file and what is wrong", async () => {
    const cases: [string, string, string][] = [
      ["channelkit.config.ts", "export default { flows: [ ;", "channelkit.config.ts: could not be loaded: "],
      ["channelkit.config.mjs", "export const flows = [];", "channelkit.config.mjs: has no default export: export the options of createChannelService"],
      ["channelkit.config.mjs", "export default 42;", "channelkit.config.mjs: exports a number, not the options of createChannelService"],
      ["channelkit.config.mjs", "export default { flow: [] };", 'channelkit.config.mjs: unknown option "flow" (the options: storage, flows,'],
      ["channelkit.config.mjs", "export default { storage: undefined };", "channelkit.config.mjs: flows is missing"],
      [
        "channelkit.config.mjs",
        'export default { flows: [{ name: "a" }] };',
        "channelkit.config.mjs: flows[0] is not a flow: a flow has a name and a run function",
      ],
      [
        "channelkit.config.js",
        'export default { flows: [{ name: "a", run() {} }], storage: { migrate() {} } };',
        "channelkit.config.js: storage is not a channelkit Storage: it has no close(),",
      ],
      [
        "channelkit.config.mts",
        'import "no-such-package"; export default {};',
        "channelkit.config.mts: could not be loaded: Cannot find module 'no-such-package'",
      ],
      ["channelkit.config.mjs", 'throw new Error("DATABASE_URL is not set");', "channelkit.config.mjs: could not be loaded: DATABASE_URL is not set"],
      ["channelkit.config.mjs", 'export default async () => { throw new Error("no secret"); };', "channelkit.config.mjs: its default export failed: no secret"],
      [
        "channelkit.config.mjs",
        'import { createChannelService, memoryStorage } from "@channelkit/core"; import { demoFlows } from "@channelkit/core/demo";\nexport default await createChannelService({ storage: memoryStorage(), flows: demoFlows, logger: { warn() {}, error() {} } });',
        "channelkit.config.mjs: exports a channel service: export the options you pass to createChannelService instead",
      ],
    ];
    for (const [name, text, message] of cases) {
      const cwd = await app({ [name]: text });
      const result = await runCli(["tenant", "list"], ENV, { cwd });
      expect(result.code, text).toBe(1);
      expect(result.stdout).toBe("");
      const { error } = JSON.parse(result.stderr.trim()) as { error: { code: string; message: string } };
      expect(error.code, text).toBe("config_error");
      expect(error.message, text).toContain(message);
    }
    const two = await app({ "channelkit.config.ts": "export default {};", "channelkit.config.mjs": "export default {};" });
    const both = await runCli(["tenant", "list"], ENV, { cwd: two });
    expect(JSON.parse(both.stderr.trim()).error).toEqual({
      code: "config_error",
      message: `channelkit.config.ts and channelkit.config.mjs are both in ${two}: keep one, or pick one with --config`,
    });
    const missing = await runCli(["tenant", "list", "--config", "nope.ts"], ENV, { cwd: two });
    expect(JSON.parse(missing.stderr.trim()).error).toEqual({
      code: "config_error",
      message: `--config nope.ts: no such file (looked for ${join(two, "nope.ts")})`,
    });
  }, 60_000);
});

describe("defineConfig", () => {
  it("answers its argument with its own type; an option the service does not have is a type error", async () => {
    const flows = [
      defineFlow({
        name: "faq",
        async *run() {
          yield text("FAQ");
        },
      }),
    ];
    const config = defineConfig({ storage: memoryStorage(), flows, turnLeaseMs: 1000 });
    expect(config.flows).toBe(flows);
    expect(config.storage.countTenants).toBeTypeOf("function");
    // @ts-expect-error a typo of flows
    expect(defineConfig({ flows, flow: [] })).toEqual({ flows, flow: [] });
    const make = defineConfig(async () => ({ flows }));
    expect((await make()).flows).toBe(flows);
  });
});
