import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LanguageModelV3StreamPart } from "@ai-sdk/provider";
import { type ChannelService, createChannelService } from "@channelkit/core";
import { sqlite } from "@channelkit/kysely";
import { type RunningServer, serve } from "@channelkit/node";
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { simulateReadableStream } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { aiFlow } from "./ai-flow.js";

/** A model call answering "Hi there", as the AI SDK's mock streams it. */
function says() {
  return {
    stream: simulateReadableStream<LanguageModelV3StreamPart>({
      chunks: [
        { type: "stream-start", warnings: [] },
        { type: "text-start", id: "t" },
        { type: "text-delta", id: "t", delta: "Hi there" },
        { type: "text-end", id: "t" },
        {
          type: "finish",
          finishReason: { unified: "stop", raw: "stop" },
          usage: { inputTokens: { total: 3, noCache: 3, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 2, text: 2, reasoning: 0 } },
        },
      ],
    }),
  };
}

describe("aiFlow with telemetry on", () => {
  const exporter = new InMemorySpanExporter();
  let dir = "";
  let service: ChannelService;
  let server: RunningServer;
  let key = "";

  beforeAll(async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
    dir = await mkdtemp(join(tmpdir(), "channelkit-ai-otel-"));
    const storage = sqlite(join(dir, "ai.db"));
    await storage.migrate();
    const model = new MockLanguageModelV3({ doStream: async () => says() });
    const assistant = aiFlow({ name: "assistant", model, telemetry: { isEnabled: true, recordInputs: false, recordOutputs: false } });
    service = await createChannelService({ storage, flows: [assistant], secretKey: "3c".repeat(32) });
    server = await serve(service, { port: 0, host: "127.0.0.1" });
    const { tenant } = await service.admin.createTenant({ name: "ai" });
    key = (await service.admin.createChannel({ tenantId: tenant.id, flow: "assistant" })).api_key;
  });
  afterAll(async () => {
    await server?.close();
    await service?.close();
    trace.disable();
    context.disable();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("the AI SDK's spans nest under the run's span, in the request's trace", async () => {
    const response = await fetch(`${server.url}/public/v1/api/execute`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ payload: "hello", stream: true }),
    });
    expect(await response.text()).toContain("Hi there");
    const spans = exporter.getFinishedSpans();
    const run = spans.find((span) => span.name === "invoke_agent assistant");
    const streamText = spans.find((span) => span.name === "ai.streamText");
    expect(streamText?.parentSpanContext?.spanId).toBe(run?.spanContext().spanId);
    expect(streamText?.spanContext().traceId).toBe(run?.spanContext().traceId);
    // The model's own call nests under streamText.
    const call = spans.find((span) => span.name === "ai.streamText.doStream");
    expect(call?.parentSpanContext?.spanId).toBe(streamText?.spanContext().spanId);
  });
});
