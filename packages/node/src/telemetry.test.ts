import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { context, metrics, SpanKind, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { type DataPoint, type Histogram, MeterProvider, MetricReader } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { type ChannelService, createChannelService, defineFlow, step, text } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { sqlite } from "@channelkit/kysely";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type RunningServer, serve } from "./serve.js";

/**
 * The spans and metrics of requests and runs, read with the SDK's in-memory exporter and a
 * metric reader, the SDK registered before the service as a host would.
 */

/** Collects the metrics on demand. */
class TestReader extends MetricReader {
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** A flow that calls a traced library in its step, as `streamText` with telemetry on does. */
const traced = defineFlow({
  name: "traced",
  async *run(ctx) {
    yield step("think", "llm");
    await trace.getTracer("a-model-library").startActiveSpan("ai.streamText", async (span) => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      span.end();
    });
    yield text(`thought about ${ctx.payload}`);
  },
});

const SECRET_KEY = "7d".repeat(32);
const PAYLOAD = "a payload no attribute may hold";

describe("OpenTelemetry", () => {
  const exporter = new InMemorySpanExporter();
  const reader = new TestReader();
  let dir = "";
  let service: ChannelService;
  let server: RunningServer;
  let keys: { echo: string; traced: string };

  beforeAll(async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
    metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
    dir = await mkdtemp(join(tmpdir(), "channelkit-otel-"));
    const storage = sqlite(join(dir, "otel.db"));
    await storage.migrate();
    service = await createChannelService({ storage, flows: [...demoFlows, traced], secretKey: SECRET_KEY });
    server = await serve(service, { port: 0, host: "127.0.0.1" });
    const { tenant } = await service.admin.createTenant({ name: "otel" });
    keys = {
      echo: (await service.admin.createChannel({ tenantId: tenant.id, flow: "echo" })).api_key,
      traced: (await service.admin.createChannel({ tenantId: tenant.id, flow: "traced" })).api_key,
    };
  });
  beforeEach(() => exporter.reset());
  afterAll(async () => {
    await server?.close();
    await service?.close();
    trace.disable();
    metrics.disable();
    context.disable();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  function execute(key: string, body: Record<string, unknown>): Promise<Response> {
    return fetch(`${server.url}/public/v1/api/execute`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  }

  const named = (spans: ReadableSpan[], name: string) => spans.filter((span) => span.name === name);
  const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

  it("a run through the API channel is one trace: the request's SERVER span, the run's span under it, its steps and storage transactions under that", async () => {
    const response = await execute(keys.echo, { payload: PAYLOAD });
    expect(response.status).toBe(200);
    const { conversation_id: conversationId } = (await response.json()) as { conversation_id: string };
    const spans = exporter.getFinishedSpans();
    const [request] = named(spans, "POST /public/v1/api/execute");
    expect(request?.kind).toBe(SpanKind.SERVER);
    expect(request?.attributes).toEqual({ "http.request.method": "POST", "http.route": "/public/v1/api/execute", "http.response.status_code": 200 });
    const [run] = named(spans, "invoke_agent echo");
    expect(parentOf(run as ReadableSpan)).toBe(request?.spanContext().spanId);
    expect(run?.attributes).toMatchObject({
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.agent.name": "echo",
      "gen_ai.conversation.id": conversationId,
      "channelkit.conversation.id": conversationId,
      "channelkit.channel.type": "api",
      "channelkit.flow.name": "echo",
      "channelkit.run.status": "success",
    });
    expect(run?.attributes["channelkit.run.turn_wait_ms"]).toBeTypeOf("number");
    // One trace: every span of the request is in the request's.
    expect(new Set(spans.map((span) => span.spanContext().traceId))).toEqual(new Set([request?.spanContext().traceId]));
    const children = spans.filter((span) => parentOf(span) === run?.spanContext().spanId).map((span) => span.name);
    expect(children).toContain("step echo");
    // A new conversation answered as JSON is stored whole at its end, in one transaction.
    expect(children).toContain("channelkit.storage storeRun");
    // Nothing secret nor said: no attribute holds the key, the payload or the master key.
    const said = JSON.stringify(spans.map((span) => span.attributes));
    for (const secret of [keys.echo, PAYLOAD, SECRET_KEY]) expect(said).not.toContain(secret);
  });

  it("a continued, streamed run: its claim and completion are its storage spans; a library the flow calls nests under the run", async () => {
    const first = (await (await execute(keys.traced, { payload: "one" })).json()) as { conversation_id: string };
    exporter.reset();
    const streamed = await execute(keys.traced, { payload: "two", conversation_id: first.conversation_id, stream: true });
    expect(await streamed.text()).toContain("thought about two");
    const spans = exporter.getFinishedSpans();
    const [request] = named(spans, "POST /public/v1/api/execute");
    const [run] = named(spans, "invoke_agent traced");
    expect(parentOf(run as ReadableSpan)).toBe(request?.spanContext().spanId);
    const children = spans.filter((span) => parentOf(span) === run?.spanContext().spanId).map((span) => span.name);
    expect(children).toEqual(expect.arrayContaining(["channelkit.storage beginRun", "channelkit.storage completeRun", "step think"]));
    const [library] = named(spans, "ai.streamText");
    expect(parentOf(library as ReadableSpan)).toBe(run?.spanContext().spanId);
    // The run starts within its request; the stream may send its last frame a moment before the
    // run's span records its end (the order of the two ends is not fixed), so only the start is.
    const nanos = (time: [number, number] | undefined) => (time?.[0] ?? 0) * 1e9 + (time?.[1] ?? 0);
    expect(nanos(run?.startTime)).toBeGreaterThanOrEqual(nanos(request?.startTime));
    expect(run?.ended && request?.ended).toBe(true);
  });

  it("a refused request is a span with its status and route; an unknown path has no route", async () => {
    expect((await execute("svc_sk_live_not-a-key", { payload: "x" })).status).toBe(401);
    expect((await fetch(`${server.url}/nowhere`)).status).toBe(404);
    const spans = exporter.getFinishedSpans();
    expect(named(spans, "POST /public/v1/api/execute")[0]?.attributes["http.response.status_code"]).toBe(401);
    expect(named(spans, "GET")[0]?.attributes).toEqual({ "http.request.method": "GET", "http.response.status_code": 404 });
    expect(JSON.stringify(spans.map((span) => span.attributes))).not.toContain("not-a-key");
  });

  it("counts requests by route and status, runs by status, turn waits and run durations; open streams go back to 0", async () => {
    const { resourceMetrics } = await reader.collect();
    const all = resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics);
    const metric = (name: string) => all.find((candidate) => candidate.descriptor.name === name);
    const requests = metric("http.server.request.duration")?.dataPoints as DataPoint<Histogram>[];
    const executeOk = requests.filter(
      (point) => point.attributes["http.route"] === "/public/v1/api/execute" && point.attributes["http.response.status_code"] === 200,
    );
    expect(executeOk.reduce((sum, point) => sum + point.value.count, 0)).toBeGreaterThanOrEqual(3);
    const runs = metric("channelkit.runs")?.dataPoints as DataPoint<number>[];
    expect(
      runs.find((point) => point.attributes["channelkit.run.status"] === "success" && point.attributes["channelkit.channel.type"] === "api")?.value,
    ).toBeGreaterThanOrEqual(3);
    expect((metric("channelkit.run.turn_wait")?.dataPoints[0] as DataPoint<Histogram>).value.count).toBeGreaterThanOrEqual(3);
    expect((metric("channelkit.run.duration")?.dataPoints[0] as DataPoint<Histogram>).value.count).toBeGreaterThanOrEqual(3);
    expect((metric("channelkit.streams.open")?.dataPoints[0] as DataPoint<number>).value).toBe(0);
  });
});
