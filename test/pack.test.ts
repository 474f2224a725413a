import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/*
 * The packages as a user gets them: every package packed with `npm pack`, the tarballs
 * installed with better-sqlite3 from the registry into a new app outside the monorepo, and
 * there the README's embedding example run and the `channelkit` command started. Runs on the
 * built packages (`npm test` builds first). Slow: better-sqlite3 compiles from source where
 * no prebuilt binary can be downloaded.
 */

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const PACKAGES = ["core", "kysely", "node", "express", "fastify", "hono", "widget", "client", "chat", "protocols", "cli", "testkit"];
/**
 * Installed into the app: all but the contract suite, a development tool whose own
 * dependencies (pg, vitest) would hide that the app works without pg.
 */
const INSTALLED = PACKAGES.filter((name) => name !== "testkit");
const SECRET_KEY = "5a".repeat(32);
const run = promisify(execFile);
const npm = process.platform === "win32" ? "npm.cmd" : "npm";

/** The environment without what `npm test` sets for the monorepo's own package. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (/^(npm_package_|npm_lifecycle_|npm_config_local_prefix$|npm_command$|INIT_CWD$|VITEST)/.test(name)) continue;
    env[name] = value;
  }
  return { ...env, NODE_ENV: "development", ...extra };
}

/** A port nothing listens on now. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The README's embedding block that names itself `file` on its first line. */
function readmeBlock(readme: string, file: string): string {
  const embedding = readme.split("## Embedding")[1]?.split("\n## ")[0] ?? "";
  const code = [...embedding.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1] as string).find((block) => block.startsWith(`// ${file}`));
  if (!code) throw new Error(`README.md's embedding has no block of ${file}`);
  return code;
}

/**
 * The README's embedding example, runnable: its flows module (`myModel` a stand-in that
 * streams back `Echo: <payload>`), its config for the command, and its server on the test's
 * port, then a tenant and a channel made with `service.admin` and one execute sent over HTTP,
 * whose answer is printed.
 */
async function readmeExample(port: number): Promise<Record<string, string>> {
  const readme = await readFile(join(ROOT, "README.md"), "utf8");
  const server = readmeBlock(readme, "server.ts");
  const listening = server.replace("serve(service, { port: 3000 })", `serve(service, { port: ${port} })`);
  if (listening === server) throw new Error("README.md's embedding example no longer calls serve(service, { port: 3000 })");
  const flows = [
    "const myModel = {",
    "  async *stream(payload) {",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a template literal of the app's source
    "    for (const word of `Echo: ${payload}`.split(/(?<= )/)) yield word;",
    "  },",
    "};",
    readmeBlock(readme, "flows.ts"),
  ].join("\n");
  const main = [
    listening,
    'const { tenant } = await service.admin.createTenant({ name: "Acme" });',
    'const created = await service.admin.createChannel({ tenantId: tenant.id, flow: "support", environment: "prod" });',
    `const response = await fetch("http://127.0.0.1:${port}/public/v1/api/execute", {`,
    '  method: "POST",',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a template literal of the app's source
    '  headers: { authorization: `Bearer ${created.api_key}`, "content-type": "application/json" },',
    '  body: JSON.stringify({ payload: "Hello, channelkit!" }),',
    "});",
    "const body = await response.json();",
    // The typed client, installed from its tarball, against the same server.
    'const { createClient } = await import("@channelkit/client");',
    `const client = createClient({ baseUrl: "http://127.0.0.1:${port}", apiKey: created.api_key });`,
    'const viaClient = await client.execute({ payload: "Again", conversation_id: body.conversation_id });',
    "console.log(JSON.stringify({ status: response.status, body, client: viaClient.output.messages }));",
    "process.exit(0);",
    "",
  ].join("\n");
  return { "flows.js": flows, "server.mjs": main, "channelkit.config.ts": readmeBlock(readme, "./channelkit.config.ts") };
}

/** The subpaths, and the error of `postgres()` in an app without pg. */
const SUBPATHS = `
import { demoFlows } from "@channelkit/core/demo";
import { toResponse } from "@channelkit/core/adapter";
import { mountChannelkit } from "@channelkit/express";
import { channelkit as fastifyPlugin } from "@channelkit/fastify";
import { channelkit as honoApp } from "@channelkit/hono";
import { postgres } from "@channelkit/kysely";
import { chatChannels } from "@channelkit/chat";
import { a2aChannels, aguiChannels, mcpChannels } from "@channelkit/protocols";
let missing = "";
try {
  postgres("postgres://127.0.0.1:1/none");
} catch (error) {
  missing = error.message;
}
console.log(JSON.stringify({
  demo: demoFlows.map((flow) => flow.name),
  adapter: typeof toResponse,
  frameworks: [typeof mountChannelkit, typeof fastifyPlugin, typeof honoApp],
  chatTypes: chatChannels().channelTypes.map((type) => type.name),
  protocolTypes: [aguiChannels(), mcpChannels(), a2aChannels()].flatMap((plugin) => plugin.channelTypes.map((type) => type.name)),
  missing,
}));
`;

describe("the packed packages, installed in a new app", () => {
  let dir: string;
  let app: string;

  beforeAll(async () => {
    for (const name of PACKAGES) {
      if (!existsSync(join(ROOT, "packages", name, "dist", "index.js"))) {
        await run(npm, ["run", "build"], { cwd: ROOT, env: cleanEnv() });
        break;
      }
    }
    dir = await mkdtemp(join(tmpdir(), "channelkit-pack-"));
    const tarballs = join(dir, "tarballs");
    app = join(dir, "app");
    await mkdir(tarballs);
    await mkdir(app);
    const packed: Record<string, string> = {};
    for (const name of PACKAGES) {
      const { stdout } = await run(npm, ["pack", "--json", "--pack-destination", tarballs], { cwd: join(ROOT, "packages", name), env: cleanEnv() });
      const [info] = JSON.parse(stdout) as [{ name: string; filename: string }];
      packed[info.name] = `file:${join(tarballs, info.filename)}`;
    }
    const installed = Object.fromEntries(INSTALLED.map((name) => [`@channelkit/${name}`, packed[`@channelkit/${name}`] as string]));
    await writeFile(
      join(app, "package.json"),
      JSON.stringify(
        {
          name: "channelkit-pack-app",
          version: "1.0.0",
          private: true,
          type: "module",
          dependencies: { ...installed, "better-sqlite3": "^12.0.0" },
          // The packages depend on each other at 0.0.0: these tarballs, never the registry's.
          overrides: installed,
        },
        null,
        2,
      ),
    );
    await run(npm, ["install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"], {
      cwd: app,
      env: cleanEnv(),
      maxBuffer: 16 * 1024 * 1024,
    });
  }, 600_000);

  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("packs every package, and every tarball has its README", async () => {
    const { stdout } = await run("tar", ["-tzf", join(dir, "tarballs", "channelkit-cli-0.0.0.tgz")]);
    expect(stdout.split("\n")).toEqual(expect.arrayContaining(["package/README.md", "package/bin/channelkit.js", "package/dist/index.d.ts"]));
    for (const name of PACKAGES) {
      const { stdout: files } = await run("tar", ["-tzf", join(dir, "tarballs", `channelkit-${name}-0.0.0.tgz`)]);
      expect(files.split("\n"), name).toEqual(
        expect.arrayContaining(["package/README.md", "package/package.json", "package/dist/index.js", "package/dist/index.d.ts"]),
      );
    }
  });

  it("runs the README's embedding example: one execute over HTTP answers Echo, and the installed client's too", async () => {
    const port = await freePort();
    // A directory of its own: its config would otherwise be the other tests' config too.
    const readme = join(app, "readme");
    await mkdir(readme);
    for (const [name, text] of Object.entries(await readmeExample(port))) await writeFile(join(readme, name), text);
    const { stdout } = await run(process.execPath, ["server.mjs"], { cwd: readme, env: cleanEnv({ CHANNELKIT_SECRET_KEY: SECRET_KEY }), timeout: 60_000 });
    const answer = JSON.parse(stdout.trim().split("\n").at(-1) as string) as {
      status: number;
      body: { status: string; output: { messages: unknown[] } };
      client: unknown[];
    };
    expect(answer.status).toBe(200);
    expect(answer.body.status).toBe("success");
    expect(answer.body.output.messages).toEqual([{ role: "assistant", content: "Echo: Hello, channelkit!" }]);
    expect(answer.client).toEqual([{ role: "assistant", content: "Echo: Again" }]);
    // The README's config gives the command the same flow (issue 41: `Unknown flow "support"` without it).
    const env = cleanEnv({ CHANNELKIT_SECRET_KEY: SECRET_KEY });
    const { stdout: tenant } = await run("npx", ["--no-install", "channelkit", "tenant", "create", "--name", "Acme"], { cwd: readme, env });
    const tenantId = (JSON.parse(tenant) as { tenant: { id: string } }).tenant.id;
    const { stdout: created } = await run("npx", ["--no-install", "channelkit", "channel", "create", "--tenant", tenantId, "--flow", "support"], {
      cwd: readme,
      env,
    });
    expect((JSON.parse(created) as { channel: { flow: string } }).channel.flow).toBe("support");
  });

  it("resolves the subpaths and the adapters, and says which package postgres() needs", async () => {
    await writeFile(join(app, "subpaths.mjs"), SUBPATHS);
    const { stdout } = await run(process.execPath, ["subpaths.mjs"], { cwd: app, env: cleanEnv(), timeout: 60_000 });
    expect(JSON.parse(stdout)).toEqual({
      demo: ["echo", "fail", "ask", "handover", "slow"],
      adapter: "function",
      frameworks: ["function", "function", "function"],
      chatTypes: ["slack", "teams", "telegram", "whatsapp", "discord", "gchat"],
      protocolTypes: ["agui", "mcp", "a2a"],
      missing: "channelkit: postgres() needs the pg package: npm install pg",
    });
  });

  it("runs the installed channelkit command", async () => {
    const help = await run("npx", ["--no-install", "channelkit", "--help"], { cwd: app, env: cleanEnv() });
    expect(help.stdout).toContain("Usage: channelkit <command> [options]");
    const migrated = await run("npx", ["--no-install", "channelkit", "migrate", "--db", "./cli.db"], {
      cwd: app,
      env: cleanEnv({ CHANNELKIT_SECRET_KEY: SECRET_KEY }),
    });
    expect(JSON.parse(migrated.stdout)).toBeTypeOf("object");
    expect(existsSync(join(app, "cli.db"))).toBe(true);
  });
});
