import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ChannelService, createChannelService, defineFlow, definePlugin, defineRoute, text } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { sqlite } from "@channelkit/kysely";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, serve } from "./serve.js";

/**
 * The probes on a real server over an SQLite file: `/healthz` and `/readyz` under the
 * service's `basePath`, readiness following the schema and the service closing. (Postgres
 * unreachable: faults.postgres.test.ts.)
 */

let release: () => void = () => undefined;
/** Answers, then waits for the test before it ends: a run in flight while the service closes. */
const held = defineFlow({
  name: "held",
  async *run() {
    yield text("holding");
    await new Promise<void>((resolve) => {
      release = resolve;
    });
  },
});

const SECRET_KEY = "5e".repeat(32);
const READY = { status: "ready", storage: "ok", migrations: "current", pending: [], draining: false };

describe("GET /healthz and /readyz", () => {
  let dir = "";
  let file = "";
  let service: ChannelService;
  let server: RunningServer;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "channelkit-health-"));
    file = join(dir, "health.db");
    const storage = sqlite(file);
    await storage.migrate();
    service = await createChannelService({ storage, flows: [...demoFlows, held], secretKey: SECRET_KEY, basePath: "/svc" });
    server = await serve(service, { port: 0, host: "127.0.0.1" });
  });
  afterAll(async () => {
    await server?.close();
    await service?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function probe(path: string, on: { handler(request: Request): Promise<Response> } | null = null) {
    const response = on ? await on.handler(new Request(`http://host.test${path}`)) : await fetch(`${server.url}${path}`);
    return { status: response.status, cache: response.headers.get("cache-control"), body: await response.json() };
  }

  it("answers both under the basePath, no key needed, never cached, off the rate limits", async () => {
    expect(await probe("/svc/healthz")).toEqual({ status: 200, cache: "no-store", body: { status: "ok" } });
    expect(await probe("/svc/readyz")).toEqual({ status: 200, cache: "no-store", body: READY });
    const response = await fetch(`${server.url}/svc/readyz`);
    expect(response.headers.get("ratelimit")).toBeNull();
    expect((await probe("/healthz")).status).toBe(404);
  });

  it("is not ready while a migration is missing from the database (its name in pending), ready once it is back", async () => {
    const database = new Database(file);
    try {
      const row = database.prepare("SELECT * FROM channelkit_migration ORDER BY name DESC LIMIT 1").get() as { name: string; timestamp: string };
      database.prepare("DELETE FROM channelkit_migration WHERE name = ?").run(row.name);
      expect(await probe("/svc/readyz")).toEqual({
        status: 503,
        cache: "no-store",
        body: { status: "not_ready", storage: "ok", migrations: "behind", pending: [row.name], draining: false },
      });
      // Alive all the same: a liveness probe must not restart an instance for its database.
      expect((await probe("/svc/healthz")).status).toBe(200);
      database.prepare("INSERT INTO channelkit_migration (name, timestamp) VALUES (?, ?)").run(row.name, row.timestamp);
      expect((await probe("/svc/readyz")).body).toEqual(READY);
    } finally {
      database.close();
    }
  });

  it("is not ready once the service closes, while its runs finish", async () => {
    const closing = await createChannelService({ storage: sqlite(file), flows: [...demoFlows, held], secretKey: SECRET_KEY });
    const { tenant } = await closing.admin.createTenant({ name: "drain" });
    const { api_key } = await closing.admin.createChannel({ tenantId: tenant.id, flow: "held" });
    const running = await closing.handler(
      new Request("http://host.test/public/v1/api/execute", {
        method: "POST",
        headers: { authorization: `Bearer ${api_key}`, "content-type": "application/json" },
        body: JSON.stringify({ payload: "hi", stream: true }),
      }),
    );
    const reader = (running.body as ReadableStream<Uint8Array>).getReader();
    // The run is in flight once its first words came.
    let read = "";
    while (!read.includes("holding")) read += new TextDecoder().decode((await reader.read()).value);
    expect((await probe("/readyz", closing)).body).toEqual(READY);
    const closed = closing.close({ drainMs: 10_000 });
    expect(await probe("/readyz", closing)).toEqual({ status: 503, cache: "no-store", body: { ...READY, status: "not_ready", draining: true } });
    release();
    while (!(await reader.read()).done);
    await closed;
  });

  it("leaves a probe path to the host's own plugin that serves it", async () => {
    const own = definePlugin({
      id: "health",
      routes: [
        defineRoute({
          method: "GET",
          path: "/healthz",
          auth: "none",
          doc: { operationId: "ownHealth", summary: "The host's own", tag: "service", responses: { 200: { description: "Up." } }, errors: [] },
          handle: () => Response.json({ mine: true }),
        }),
      ],
    });
    const hosted = await createChannelService({ storage: sqlite(file), flows: demoFlows, secretKey: SECRET_KEY, plugins: [own] });
    try {
      expect((await probe("/healthz", hosted)).body).toEqual({ mine: true });
      expect((await probe("/readyz", hosted)).body).toEqual(READY);
    } finally {
      await hosted.close();
    }
  });

  it("is left out with health: false", async () => {
    const bare = await createChannelService({ storage: sqlite(file), flows: demoFlows, secretKey: SECRET_KEY, health: false });
    try {
      for (const path of ["/healthz", "/readyz"]) expect(await probe(path, bare)).toMatchObject({ status: 404, body: { error: { code: "not_found" } } });
    } finally {
      await bare.close();
    }
  });
});
