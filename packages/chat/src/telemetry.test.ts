/**
 * A chat platform's delivery as OpenTelemetry sees it: the webhook's request and the run it
 * starts are one trace, read with the SDK's in-memory exporter (Telegram's real adapter, its
 * Bot API a stand-in on 127.0.0.1).
 */
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TelegramStandIn } from "./telegram-standin.js";
import { sqliteDatabase, TwoInstances } from "./test-services.js";

const SECRET_TOKEN = "telegram-secret_0123456789";
const BOT_TOKEN = "123456:otel-bot-token";

describe("a chat channel's run in a trace", () => {
  const exporter = new InMemorySpanExporter();
  const bot = new TelegramStandIn();
  const instances = new TwoInstances();
  let channelId = "";

  beforeAll(async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
    await bot.start();
    await instances.start(await sqliteDatabase(), "4e".repeat(32));
    const created = await instances.admin.createChannel({
      tenantId: instances.tenantId,
      flow: "echo",
      type: "telegram",
      settings: { bot_token: BOT_TOKEN, secret_token: SECRET_TOKEN, api_url: bot.url },
    });
    channelId = created.channel.id;
  }, 60_000);
  afterAll(async () => {
    await instances.stop();
    await bot.close();
    trace.disable();
    context.disable();
  });

  it("the delivery's SERVER span and the run's span under it are one trace; no attribute holds the bot's token or the message", async () => {
    const update = {
      update_id: 77,
      message: { message_id: 77, from: { id: 901, is_bot: false, first_name: "Ada" }, chat: { id: 901, type: "private" }, date: 1, text: "traced words" },
    };
    const delivered = await fetch(instances.webhookUrl(channelId), {
      method: "POST",
      headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN },
      body: JSON.stringify(update),
    });
    expect(delivered.status).toBe(200);
    await bot.waitFor(() => bot.textOf(901).includes("Echo: traced words"), "the reply");
    const runEnded = () => exporter.getFinishedSpans().some((span) => span.name === "invoke_agent echo");
    await bot.waitFor(runEnded, "the run's span to end");
    const spans = exporter.getFinishedSpans();
    const request = spans.find((span) => span.name === "POST /channels/chat/:channel_id") as ReadableSpan;
    const run = spans.find((span) => span.name === "invoke_agent echo") as ReadableSpan;
    expect(request.attributes["http.response.status_code"]).toBe(200);
    expect(run.attributes).toMatchObject({ "channelkit.channel.type": "telegram", "channelkit.channel.id": channelId, "channelkit.run.status": "success" });
    expect(run.spanContext().traceId).toBe(request.spanContext().traceId);
    // The run's span is under the request's, through the spans between them (the adapter's own, if any).
    const byId = new Map(spans.map((span) => [span.spanContext().spanId, span]));
    let parent = byId.get(run.parentSpanContext?.spanId ?? "");
    while (parent && parent !== request) parent = byId.get(parent.parentSpanContext?.spanId ?? "");
    expect(parent).toBe(request);
    const said = JSON.stringify(spans.map((span) => span.attributes));
    for (const secret of [BOT_TOKEN, SECRET_TOKEN, "traced words"]) expect(said).not.toContain(secret);
  });
});
