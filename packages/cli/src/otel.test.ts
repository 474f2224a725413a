/**
 * `channelkit serve --otel`: the served service's spans and metrics reach an OTLP collector
 * (a local HTTP server here) over OTLP/HTTP, the run's span under its request's, the last ones
 * exported on SIGTERM after the service closed; without the flag, or with
 * `OTEL_SDK_DISABLED=true`, nothing is sent.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuilt, killAll, runCliJson, type ServeProcess, startServe } from "./test-process.js";

const ENV = { CHANNELKIT_SECRET_KEY: randomBytes(32).toString("hex") };

/** An OTLP attribute as the JSON encoding writes it. */
interface OtlpAttribute {
  key: string;
  value: { stringValue?: string; intValue?: number | string };
}

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes?: OtlpAttribute[];
}

interface OtlpResource {
  attributes: OtlpAttribute[];
}

/** One POST the collector received, its body parsed as OTLP's JSON. */
interface Export {
  path: string;
  body: {
    resourceSpans?: { resource: OtlpResource; scopeSpans: { spans: OtlpSpan[] }[] }[];
    resourceMetrics?: { resource: OtlpResource; scopeMetrics: { metrics: { name: string }[] }[] }[];
  };
}

/** A stand-in for an OpenTelemetry collector: takes POST /v1/traces and /v1/metrics, keeps each body. */
class Collector {
  readonly exports: Export[] = [];
  readonly #waiters: { test: (item: Export) => boolean; resolve: (item: Export) => void }[] = [];
  readonly #server: Server;

  constructor() {
    this.#server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        const known = request.method === "POST" && (request.url === "/v1/traces" || request.url === "/v1/metrics");
        if (!known || !request.headers["content-type"]?.startsWith("application/json")) {
          response.writeHead(404).end();
          return;
        }
        const item: Export = { path: request.url as string, body: JSON.parse(Buffer.concat(chunks).toString("utf8")) };
        this.exports.push(item);
        for (const waiter of [...this.#waiters]) {
          if (!waiter.test(item)) continue;
          this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
          waiter.resolve(item);
        }
        response.writeHead(200, { "content-type": "application/json" }).end("{}");
      });
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.#server.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  /** The first export, received or to come, that `test` accepts. */
  next(test: (item: Export) => boolean): Promise<Export> {
    const found = this.exports.find(test);
    if (found) return Promise.resolve(found);
    return new Promise((resolve) => this.#waiters.push({ test, resolve }));
  }

  spans(): OtlpSpan[] {
    return this.exports.flatMap((item) => (item.body.resourceSpans ?? []).flatMap((r) => r.scopeSpans.flatMap((s) => s.spans)));
  }

  close(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }
}

function attribute(attributes: OtlpAttribute[] | undefined, key: string): string | number | undefined {
  const value = attributes?.find((a) => a.key === key)?.value;
  return value?.stringValue ?? (value?.intValue === undefined ? undefined : Number(value.intValue));
}

describe("channelkit serve --otel", () => {
  const db = join(tmpdir(), `channelkit-otel-${randomUUID()}.db`);
  const collectors: Collector[] = [];
  let key = "";

  beforeAll(async () => {
    await ensureBuilt();
    const tenantId = (await runCliJson<{ tenant: { id: string } }>(["tenant", "create", "--name", "Otel", "--db", db], ENV)).tenant.id;
    key = (await runCliJson<{ api_key: string }>(["channel", "create", "--tenant", tenantId, "--flow", "echo", "--db", db], ENV)).api_key;
  }, 120_000);

  afterAll(async () => {
    await killAll();
    await Promise.all(collectors.map((c) => c.close()));
    await Promise.all(["", "-wal", "-shm"].map((suffix) => rm(`${db}${suffix}`, { force: true })));
  });

  async function collector(): Promise<{ collector: Collector; endpoint: string }> {
    const made = new Collector();
    collectors.push(made);
    return { collector: made, endpoint: await made.listen() };
  }

  /** The variables of a collector at `endpoint`, and none of the shell's OpenTelemetry ones. */
  function otelEnv(endpoint: string, extra: Record<string, string> = {}): Record<string, string | undefined> {
    const cleared = Object.fromEntries(Object.keys(process.env).flatMap((name) => (name.startsWith("OTEL_") ? [[name, undefined]] : [])));
    return { ...ENV, ...cleared, OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json", ...extra };
  }

  async function execute(server: ServeProcess): Promise<void> {
    const answer = await fetch(`${server.url}/public/v1/api/execute`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ payload: "hi", stream: false }),
    });
    expect(answer.status).toBe(200);
    await answer.json();
  }

  async function stop(server: ServeProcess): Promise<void> {
    server.child.kill("SIGTERM");
    expect(await server.exited).toBe(0);
  }

  it("exports the request's span with the run's under it, and the metrics, the last ones on SIGTERM", async () => {
    const { collector: otlp, endpoint } = await collector();
    const server = await startServe(
      ["--db", db, "--port", "0", "--otel"],
      otelEnv(endpoint, { OTEL_RESOURCE_ATTRIBUTES: "deployment.environment.name=test", OTEL_BSP_SCHEDULE_DELAY: "60000" }),
    );
    await execute(server);
    const hasRun = (item: Export) => item.path === "/v1/traces" && JSON.stringify(item.body).includes('"invoke_agent echo"');
    const traced = otlp.next(hasRun);
    const measured = otlp.next((item) => item.path === "/v1/metrics");
    // The batch waits 60 s and the metrics 60 s: both come with the shutdown after SIGTERM.
    await stop(server);
    await Promise.all([traced, measured]);

    const spans = otlp.spans();
    const request = spans.find((s) => s.name === "POST /public/v1/api/execute");
    const run = spans.find((s) => s.name === "invoke_agent echo");
    expect(request).toBeDefined();
    expect(run).toBeDefined();
    expect(attribute(request?.attributes, "http.route")).toBe("/public/v1/api/execute");
    expect(attribute(request?.attributes, "http.response.status_code")).toBe(200);
    expect(run?.traceId).toBe(request?.traceId);
    expect(run?.parentSpanId).toBe(request?.spanId);
    const storage = spans.filter((s) => s.name.startsWith("channelkit.storage "));
    expect(storage.length).toBeGreaterThan(0);
    for (const span of storage) expect(span.parentSpanId).toBe(run?.spanId);

    const resource = (await traced).body.resourceSpans?.[0]?.resource;
    expect(attribute(resource?.attributes, "service.name")).toBe("channelkit");
    expect(attribute(resource?.attributes, "deployment.environment.name")).toBe("test");

    const metrics = otlp.exports.flatMap((item) =>
      (item.body.resourceMetrics ?? []).flatMap((r) => r.scopeMetrics.flatMap((s) => s.metrics.map((m) => m.name))),
    );
    expect(metrics).toContain("http.server.request.duration");
    expect(metrics).toContain("channelkit.runs");
    expect(attribute((await measured).body.resourceMetrics?.[0]?.resource.attributes, "service.name")).toBe("channelkit");
  }, 60_000);

  it("OTEL_SERVICE_NAME names the service", async () => {
    const { collector: otlp, endpoint } = await collector();
    const server = await startServe(["--db", db, "--port", "0", "--otel"], otelEnv(endpoint, { OTEL_SERVICE_NAME: "support-bot" }));
    await execute(server);
    const traced = otlp.next((item) => item.path === "/v1/traces");
    await stop(server);
    expect(attribute((await traced).body.resourceSpans?.[0]?.resource.attributes, "service.name")).toBe("support-bot");
  }, 60_000);

  it("sends nothing without --otel, even with the variables set, nor with OTEL_SDK_DISABLED=true", async () => {
    const { collector: otlp, endpoint } = await collector();
    const plain = await startServe(["--db", db, "--port", "0"], otelEnv(endpoint, { OTEL_TRACES_EXPORTER: "otlp" }));
    await execute(plain);
    await stop(plain);
    const disabled = await startServe(["--db", db, "--port", "0", "--otel"], otelEnv(endpoint, { OTEL_SDK_DISABLED: "true" }));
    expect(disabled.lines).toContain("--otel: OTEL_SDK_DISABLED=true, no OpenTelemetry SDK started");
    await execute(disabled);
    await stop(disabled);
    // Each process has exited: an SDK would have exported before its exit.
    expect(otlp.exports).toEqual([]);
  }, 60_000);
});
