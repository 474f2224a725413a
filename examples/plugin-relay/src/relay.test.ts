/**
 * The relay plugin as a platform sees it, on real SQLite and Postgres over real HTTP: the
 * platform's deliveries sent to `serve()` on 127.0.0.1, its callback a small HTTP server of
 * the test's. Then two processes on one database receiving the same deliveries at once:
 * each delivery runs once in total.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type ChannelService, createChannelService, externalConversationId, type Storage } from "@channelkit/core";
import { type KyselyStorage, pluginDatabase, postgres, sqlite } from "@channelkit/kysely";
import { type RunningServer, serve } from "@channelkit/node";
import { createTestDatabase, describeWithPostgres } from "@channelkit/testkit";
import { build, type Plugin } from "esbuild";
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { docBlocks } from "../../../test/docs.js";
import { type RelayDelivery, relayChannel } from "./index.js";
import { replyFlow } from "./reply-flow.js";

const SECRET_KEY = "7a".repeat(32);
const TOKEN = "relay-token-0123456789-abcdef";
const ROOT = fileURLToPath(new URL("../../../", import.meta.url));

/** A database the tests open: its location (a file or a URL), and how to remove it. */
interface TestDatabase {
  location: string;
  open(): KyselyStorage;
  dispose(): Promise<void>;
}

async function sqliteDatabase(): Promise<TestDatabase> {
  const dir = await mkdtemp(join(tmpdir(), "channelkit-relay-"));
  const location = join(dir, "relay.db");
  return { location, open: () => sqlite(location), dispose: () => rm(dir, { recursive: true, force: true }) };
}

async function postgresDatabase(serverUrl: string): Promise<TestDatabase> {
  const database = await createTestDatabase(serverUrl);
  return { location: database.url, open: () => postgres(database.url), dispose: () => database.drop() };
}

/** A POST the plugin made to the platform's callback. */
interface Callback {
  token: string | undefined;
  body: { thread_id: string; text: string };
}

/** The platform's side: a server on 127.0.0.1 taking the replies the plugin posts. */
class Platform {
  readonly received: Callback[] = [];
  readonly #waiting = new Set<() => void>();
  #server: Server | undefined;
  url = "";

  async start(): Promise<void> {
    this.#server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        this.received.push({ token: request.headers["x-relay-token"] as string | undefined, body: JSON.parse(Buffer.concat(chunks).toString()) });
        response.writeHead(204).end();
        for (const wake of this.#waiting) wake();
      });
    });
    this.#server.listen(0, "127.0.0.1");
    await once(this.#server, "listening");
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}/callback`;
  }

  /** Resolves once `count` replies in all were posted; fails after `ms`, naming what it waited for. */
  waitFor(count: number, what: string, ms = 15_000): Promise<Callback[]> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (this.received.length < count) return false;
        this.#waiting.delete(wake);
        clearTimeout(timer);
        resolve(this.received.slice());
        return true;
      };
      const wake = () => void check();
      const timer = setTimeout(() => {
        this.#waiting.delete(wake);
        reject(new Error(`waited ${ms} ms for ${what}: ${count} replies posted to the callback in all, got ${this.received.length}`));
      }, ms);
      if (!check()) this.#waiting.add(wake);
    });
  }

  async stop(): Promise<void> {
    this.#server?.closeAllConnections();
    await new Promise((resolve) => this.#server?.close(resolve));
  }
}

/** A delivery of the platform to `baseUrl`'s relay channel `channelId`. */
async function deliver(baseUrl: string, channelId: string, update: Record<string, unknown>, token: string | null = TOKEN) {
  const response = await fetch(`${baseUrl}/channels/relay/${channelId}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token === null ? {} : { "x-relay-token": token }) },
    body: JSON.stringify(update),
  });
  return { status: response.status, body: (await response.json()) as Record<string, any> };
}

/** How many runs the database holds. */
async function runCount(storage: KyselyStorage): Promise<number> {
  const row = await storage.db
    .selectFrom("runs")
    .select((eb) => eb.fn.countAll<number | string>().as("n"))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** The plugin's table, as its own queries read it. */
async function deliveries(storage: Storage): Promise<RelayDelivery[]> {
  const rows = (await pluginDatabase(storage).selectFrom("relay_deliveries").selectAll().orderBy("update_id").execute()) as RelayDelivery[];
  // Postgres reads a bigint as a string.
  return rows.map((row) => ({ ...row, update_id: Number(row.update_id) }));
}

function relayTests(name: string, database: () => Promise<TestDatabase>) {
  describe(`the relay plugin on ${name}`, () => {
    let db: TestDatabase;
    let storage: KyselyStorage;
    let service: ChannelService;
    let server: RunningServer;
    const platform = new Platform();
    let tenantId: string;

    beforeAll(async () => {
      db = await database();
      await platform.start();
      const plugins = [relayChannel()];
      storage = db.open();
      await storage.migrate({ plugins });
      service = await createChannelService({ storage, flows: [replyFlow], plugins, secretKey: SECRET_KEY, logger: { warn() {}, error() {} } });
      server = await serve(service, { port: 0 });
      tenantId = (await service.admin.createTenant({ name: "Relay" })).tenant.id;
    });

    afterAll(async () => {
      await server?.close();
      await service?.close();
      await platform.stop();
      await db?.dispose();
    });

    const createRelayChannel = (flow = "reply") =>
      service.admin.createChannel({ tenantId, flow, type: "relay", name: "Relay bot", settings: { callback_url: platform.url, token: TOKEN } });

    it("creates a relay channel through service.admin: the token is sealed, in no read nor the audit trail", async () => {
      const created = await createRelayChannel();
      expect(created.channel).toMatchObject({ type: "relay", settings: { callback_url: platform.url }, secrets: ["token"] });
      const reads = [
        created,
        await service.admin.getChannel(created.channel.id),
        await service.admin.listChannels({ tenantId }),
        await service.admin.audit({ channelId: created.channel.id }),
      ];
      for (const read of reads) expect(JSON.stringify(read)).not.toContain(TOKEN);
      const row = await storage.db.selectFrom("channels").selectAll().where("id", "=", created.channel.id).executeTakeFirstOrThrow();
      expect(JSON.stringify(row)).not.toContain(TOKEN);
      // A token too short is the type's schema's 422, naming the setting.
      await expect(
        service.admin.createChannel({ tenantId, flow: "reply", type: "relay", settings: { callback_url: platform.url, token: "short" } }),
      ).rejects.toMatchObject({ code: "validation_error", details: [{ path: "settings.token" }] });
    });

    it("a wrong or missing token is 401 relay_token_invalid in the envelope, and runs nothing", async () => {
      const { channel } = await createRelayChannel();
      const update = { update_id: 1, thread_id: "t-refused", user_id: "u1", text: "hi" };
      const runs = await runCount(storage);
      for (const token of ["not-the-token-0123456789", null]) {
        const refused = await deliver(server.url, channel.id, update, token);
        expect(refused).toEqual({
          status: 401,
          body: { error: { code: "relay_token_invalid", message: "The X-Relay-Token header is missing or is not this channel's token." } },
        });
      }
      expect(await runCount(storage)).toBe(runs);
      expect((await deliveries(storage)).filter((row) => row.channel_id === channel.id)).toEqual([]);
    });

    it("a delivery runs the flow on the thread's conversation and its reply is posted to the callback; the next message of the thread continues it", async () => {
      const { channel } = await createRelayChannel();
      const before = platform.received.length;
      const first = await deliver(server.url, channel.id, { update_id: 100, thread_id: "thread-a", user_id: "ada", text: "Hello" });
      expect(first).toEqual({ status: 200, body: { conversation_id: expect.any(String), run_id: expect.any(String), status: "success" } });
      const conversationId = first.body.conversation_id as string;
      expect(conversationId).toBe(await externalConversationId(channel, "thread-a"));

      // The reply reaches the platform, with the channel's token, in the message's thread.
      await platform.waitFor(before + 1, "the reply to update 100");
      expect(platform.received[before]).toEqual({ token: TOKEN, body: { thread_id: "thread-a", text: "ada said: Hello (message 1)" } });

      // The same thread is the same conversation.
      const second = await deliver(server.url, channel.id, { update_id: 101, thread_id: "thread-a", user_id: "ada", text: "Again" });
      expect(second).toMatchObject({ status: 200, body: { conversation_id: conversationId, status: "success" } });
      expect(second.body.run_id).not.toBe(first.body.run_id);
      await platform.waitFor(before + 2, "the reply to update 101");
      expect(platform.received[before + 1]?.body).toEqual({ thread_id: "thread-a", text: "ada said: Again (message 2)" });

      // The conversation's history: each user message and its reply.
      const history = await storage.listRecentMessages(conversationId, 50);
      expect(history.map((message) => [message.role, message.content])).toEqual([
        ["user", "Hello"],
        ["assistant", "ada said: Hello (message 1)"],
        ["user", "Again"],
        ["assistant", "ada said: Again (message 2)"],
      ]);
      expect(history.map((message) => message.runId)).toEqual([first.body.run_id, first.body.run_id, second.body.run_id, second.body.run_id]);

      // Another thread is another conversation.
      const other = await deliver(server.url, channel.id, { update_id: 102, thread_id: "thread-b", user_id: "bob", text: "Hi" });
      expect(other.body.conversation_id).not.toBe(conversationId);
      await platform.waitFor(before + 3, "the reply to update 102");
      expect(platform.received[before + 2]?.body).toEqual({ thread_id: "thread-b", text: "bob said: Hi (message 1)" });

      // The plugin's table recorded each delivery.
      expect((await deliveries(storage)).filter((row) => row.channel_id === channel.id)).toEqual([
        { channel_id: channel.id, update_id: 100, thread_id: "thread-a", conversation_id: conversationId, user_id: "ada", received_at: expect.any(String) },
        { channel_id: channel.id, update_id: 101, thread_id: "thread-a", conversation_id: conversationId, user_id: "ada", received_at: expect.any(String) },
        {
          channel_id: channel.id,
          update_id: 102,
          thread_id: "thread-b",
          conversation_id: other.body.conversation_id,
          user_id: "bob",
          received_at: expect.any(String),
        },
      ]);
    });

    it("the same update_id again answers { duplicate: true } and runs nothing", async () => {
      const { channel } = await createRelayChannel();
      const update = { update_id: 7, thread_id: "thread-retried", user_id: "cy", text: "Once" };
      const first = await deliver(server.url, channel.id, update);
      expect(first.body.status).toBe("success");
      const runs = await runCount(storage);
      for (let retry = 0; retry < 3; retry++) expect(await deliver(server.url, channel.id, update)).toEqual({ status: 200, body: { duplicate: true } });
      expect(await runCount(storage)).toBe(runs);
      expect((await storage.listRecentMessages(first.body.conversation_id, 50)).map((message) => message.content)).toEqual([
        "Once",
        "cy said: Once (message 1)",
      ]);
      expect((await deliveries(storage)).filter((row) => row.channel_id === channel.id).map((row) => row.update_id)).toEqual([7]);
      // The same update_id on another channel is another delivery.
      const { channel: another } = await createRelayChannel();
      expect((await deliver(server.url, another.id, update)).body.status).toBe("success");
    });

    it("an unknown channel is 404; an inactive or archived one answers 200 and runs nothing", async () => {
      const update = { update_id: 1, thread_id: "t", user_id: "u", text: "hi" };
      expect(await deliver(server.url, "00000000-0000-4000-8000-000000000000", update)).toMatchObject({
        status: 404,
        body: { error: { code: "channel_not_found" } },
      });
      // A channel of another type is not a relay channel.
      const api = await service.admin.createChannel({ tenantId, flow: "reply" });
      expect(await deliver(server.url, api.channel.id, update)).toMatchObject({ status: 404, body: { error: { code: "channel_not_found" } } });

      const { channel } = await createRelayChannel();
      const runs = await runCount(storage);
      await service.admin.updateChannel(channel.id, { state: "inactive" });
      expect(await deliver(server.url, channel.id, update)).toEqual({ status: 200, body: { ignored: "inactive" } });
      // Still the token first: a stranger learns nothing of the channel.
      expect((await deliver(server.url, channel.id, update, "not-the-token-0123456789")).status).toBe(401);
      await service.admin.updateChannel(channel.id, { state: "archived" });
      expect(await deliver(server.url, channel.id, update)).toEqual({ status: 200, body: { ignored: "archived" } });
      expect(await runCount(storage)).toBe(runs);
      expect((await deliveries(storage)).filter((row) => row.channel_id === channel.id)).toEqual([]);
    });

    it("a delivery an instance cannot run is given back: the platform's retry on another instance runs it", async () => {
      // A deploy under way: a new instance has the flow "later", this one does not yet.
      const upgraded = await createChannelService({
        storage: db.open(),
        flows: [replyFlow, { ...replyFlow, name: "later" }],
        plugins: [relayChannel()],
        secretKey: SECRET_KEY,
        logger: { warn() {}, error() {} },
      });
      const upgradedServer = await serve(upgraded, { port: 0 });
      try {
        const { channel } = await upgraded.admin.createChannel({
          tenantId,
          flow: "later",
          type: "relay",
          settings: { callback_url: platform.url, token: TOKEN },
        });
        const update = { update_id: 9, thread_id: "thread-later", user_id: "di", text: "Later" };
        // This instance answers 503 flow_unavailable and keeps nothing of the delivery.
        expect(await deliver(server.url, channel.id, update)).toMatchObject({ status: 503, body: { error: { code: "flow_unavailable" } } });
        expect(await storage.pluginStore("relay").get(`update:${channel.id}:9`)).toBeUndefined();
        expect((await deliveries(storage)).filter((row) => row.channel_id === channel.id)).toEqual([]);
        // The platform's retry, on the new instance, runs it; then it is a duplicate everywhere.
        expect((await deliver(upgradedServer.url, channel.id, update)).body.status).toBe("success");
        expect(await deliver(server.url, channel.id, update)).toEqual({ status: 200, body: { duplicate: true } });
      } finally {
        await upgradedServer.close();
        await upgraded.close();
      }
    });

    it("refuses a body that is not a delivery with 422, naming the field", async () => {
      const { channel } = await createRelayChannel();
      const refused = await deliver(server.url, channel.id, { update_id: "one", thread_id: "t", user_id: "u", text: "" });
      expect(refused.status).toBe(422);
      expect(refused.body.error.code).toBe("validation_error");
      expect((refused.body.error.details as { path: string }[]).map((detail) => detail.path).sort()).toEqual(["text", "update_id"]);
    });

    it("the route and its error code are in GET /public/v1/openapi.json, with the plugin's tag and security scheme", async () => {
      const response = await fetch(`${server.url}/public/v1/openapi.json`);
      expect(response.status).toBe(200);
      const document = (await response.json()) as Record<string, any>;
      const operation = document.paths["/channels/relay/{channel_id}"]?.post;
      expect(operation).toMatchObject({ operationId: "relayDeliver", tags: ["Relay"], security: [{ relayToken: [] }] });
      expect(document.components.securitySchemes.relayToken).toEqual({ type: "apiKey", in: "header", name: "X-Relay-Token" });
      expect(document.tags).toContainEqual({ name: "Relay", description: expect.any(String) });
      expect(JSON.stringify(operation.responses["401"])).toContain("relay_token_invalid");
      expect(operation.requestBody.content["application/json"].schema.properties).toHaveProperty("update_id");
    });
  });
}

relayTests("SQLite", sqliteDatabase);
describeWithPostgres("the relay plugin on Postgres", (serverUrl) => relayTests("Postgres", () => postgresDatabase(serverUrl)));

/** The example's server (src/server.ts) bundled from the sources, for `node` to run in a child process. */
async function bundleServer(dir: string): Promise<string> {
  // `@channelkit/<package>[/<entry>]` → packages/<package>/src/<entry or index>.ts, as vitest.config.ts maps them.
  const sources: Plugin = {
    name: "channelkit-sources",
    setup(build) {
      build.onResolve({ filter: /^@channelkit\// }, ({ path }) => {
        const [, pkg, entry] = /^@channelkit\/([^/]+)(?:\/(.+))?$/.exec(path) ?? [];
        return { path: join(ROOT, "packages", pkg as string, "src", `${entry ?? "index"}.ts`) };
      });
    },
  };
  const result = await build({
    entryPoints: [fileURLToPath(new URL("./server.ts", import.meta.url))],
    bundle: true,
    format: "cjs",
    platform: "node",
    target: "node20",
    // The database drivers as the child's require finds them (NODE_PATH); the rest from these sources.
    external: ["better-sqlite3", "pg", "pg-native"],
    plugins: [sources],
    write: false,
    logLevel: "silent",
  });
  const file = join(dir, "server.cjs");
  await writeFile(file, result.outputFiles[0]?.text ?? "");
  return file;
}

interface Instance {
  url: string;
  output(): string;
  stop(): Promise<void>;
}

/** Starts the bundled server on `location` and resolves once it prints where it listens. */
async function startInstance(script: string, location: string): Promise<Instance> {
  const child = spawn(process.execPath, [script], {
    env: { ...process.env, CHANNELKIT_DB: location, CHANNELKIT_SECRET_KEY: SECRET_KEY, PORT: "0", HOST: "127.0.0.1", NODE_PATH: join(ROOT, "node_modules") },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the relay server did not print "listening on" within 20 s:\n${output}`)), 20_000);
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      const found = /listening on (http:\/\/\S+)/.exec(output);
      if (found) {
        clearTimeout(timer);
        resolve(found[1] as string);
      }
    };
    child.stdout.on("data", read);
    child.stderr.on("data", read);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the relay server exited with ${code}:\n${output}`));
    });
  });
  return { url, output: () => output, stop: () => stop(child) };
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const force = setTimeout(() => child.kill("SIGKILL"), 5000);
    child.once("exit", () => {
      clearTimeout(force);
      resolve();
    });
    child.kill("SIGTERM");
  });
}

const UPDATES = 20;
const THREADS = 5;

function twoProcessTests(name: string, database: () => Promise<TestDatabase>) {
  describe(`two processes with the relay plugin on ${name}`, () => {
    let dir: string;
    let script: string;
    let db: TestDatabase;
    let storage: KyselyStorage;
    let service: ChannelService;
    const platform = new Platform();
    const instances: Instance[] = [];

    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), "channelkit-relay-processes-"));
      [script, db] = await Promise.all([bundleServer(dir), database(), platform.start()]);
      // Migrated and provisioned here, as an operator would before starting the instances.
      const plugins = [relayChannel()];
      storage = db.open();
      await storage.migrate({ plugins });
      service = await createChannelService({ storage, flows: [replyFlow], plugins, secretKey: SECRET_KEY, logger: { warn() {}, error() {} } });
      instances.push(...(await Promise.all([startInstance(script, db.location), startInstance(script, db.location)])));
    }, 60_000);

    afterAll(async () => {
      await Promise.all(instances.map((instance) => instance.stop()));
      await service?.close();
      await platform.stop();
      await db?.dispose();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it(`each of ${UPDATES} deliveries sent to both processes at once runs exactly once in total`, async () => {
      onTestFailed(() => console.error(instances.map((instance, i) => `instance ${i + 1} printed:\n${instance.output()}`).join("\n")));
      const { tenant } = await service.admin.createTenant({ name: "Relay" });
      const { channel } = await service.admin.createChannel({
        tenantId: tenant.id,
        flow: "reply",
        type: "relay",
        settings: { callback_url: platform.url, token: TOKEN },
      });
      const updates = Array.from({ length: UPDATES }, (_, i) => ({
        update_id: 1000 + i,
        thread_id: `thread-${i % THREADS}`,
        user_id: `user-${i}`,
        text: `message ${i}`,
      }));

      // Every delivery to both instances, all at once: the platform retrying on another instance.
      const answers = await Promise.all(
        updates.flatMap((update) => instances.map((instance) => deliver(instance.url, channel.id, update).then((answer) => ({ update, answer })))),
      );
      for (const update of updates) {
        const pair = answers.filter((entry) => entry.update === update).map((entry) => entry.answer);
        const ran = pair.filter((answer) => answer.body.status !== undefined);
        const duplicates = pair.filter((answer) => answer.body.duplicate === true);
        expect({ update: update.update_id, ran: ran.length, duplicates: duplicates.length, statuses: pair.map((answer) => answer.status) }).toEqual({
          update: update.update_id,
          ran: 1,
          duplicates: 1,
          statuses: [200, 200],
        });
        expect(ran[0]?.body).toMatchObject({ status: "success", conversation_id: await externalConversationId(channel, update.thread_id) });
      }

      // One reply per delivery reaches the platform; none twice.
      const replies = await platform.waitFor(UPDATES, `the replies to the ${UPDATES} deliveries`);
      expect(replies).toHaveLength(UPDATES);
      expect(new Set(replies.map((reply) => reply.body.text)).size).toBe(UPDATES);

      expect(await runCount(storage)).toBe(UPDATES);
      expect((await deliveries(storage)).map((row) => row.update_id)).toEqual(updates.map((update) => update.update_id));
      // Each thread's conversation: its messages once each, and its runs took turns (the flow counted 1 to 4).
      for (let thread = 0; thread < THREADS; thread++) {
        const conversationId = await externalConversationId(channel, `thread-${thread}`);
        const history = await storage.listRecentMessages(conversationId, 50);
        const sent = updates.filter((update) => update.thread_id === `thread-${thread}`);
        expect(
          history
            .filter((message) => message.role === "user")
            .map((message) => message.content)
            .sort(),
        ).toEqual(sent.map((update) => update.text).sort());
        const counted = history.filter((message) => message.role === "assistant").map((message) => /\(message (\d+)\)$/.exec(message.content)?.[1]);
        expect(counted).toEqual(sent.map((_, i) => String(i + 1)));
      }
    });
  });
}

twoProcessTests("one SQLite file", sqliteDatabase);
describeWithPostgres("two processes with the relay plugin on Postgres", (serverUrl) => twoProcessTests("Postgres", () => postgresDatabase(serverUrl)));

describe("docs/plugins.md", () => {
  /** The module a page's blocks make of `// <name>` and the `continues` blocks after it, without that first line. */
  const moduleOf = (name: string) => {
    const blocks = docBlocks("docs/plugins.md");
    const first = blocks.findIndex((block) => block.lang === "ts" && block.code.startsWith(`// ${name}\n`));
    expect(first, `docs/plugins.md has a ts block starting with // ${name}`).toBeGreaterThanOrEqual(0);
    const parts = [blocks[first] as (typeof blocks)[number]];
    for (const block of blocks.slice(first + 1)) {
      if (!(block.lang === "ts" && block.flags.includes("continues"))) break;
      parts.push(block);
    }
    return parts
      .map((block) => block.code)
      .join("\n")
      .slice(`// ${name}\n`.length);
  };
  /** A source file without its opening doc comment. */
  const source = async (file: string) => (await readFile(fileURLToPath(new URL(file, import.meta.url)), "utf8")).replace(/^\/\*\*[\s\S]*?\*\/\n/, "");

  it("walks through src/index.ts whole, in order", async () => {
    expect(moduleOf("relay.ts")).toBe(await source("./index.ts"));
  });

  it("ends with src/guide.test.ts, the test its reader writes", async () => {
    expect(moduleOf("relay.test.ts")).toBe((await source("./guide.test.ts")).replace('from "./index.js"', 'from "./relay.js"'));
  });
});
