import { RateLimiter } from "../ratelimit/limiter.js";
import { memoryRateLimitStore } from "../ratelimit/store.js";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { createSecretBox } from "../auth/secret-box.js";
import type { RegisteredFlow, ServiceInternals } from "../context.js";
import { estimateTokens } from "../conversations/tokens.js";
import { defineFlow } from "../flows/define.js";
import { message, setState, step, text } from "../flows/events.js";
import type { ChannelRecord } from "../storage/types.js";
import { memoryStorage } from "../storage/memory.js";
import { inProcessFeed } from "../livechat/feed.js";
import { LiveChat } from "../livechat/live-chat.js";
import { RunStreams } from "../streams/run-streams.js";
import { OpenStreams } from "../ratelimit/open-streams.js";
import { PluginRegistry } from "../plugin/registry.js";
import { RunLifecycle } from "./lifecycle.js";
import { runsOf } from "./runs.js";
import { type StartedRun, startRun } from "./start.js";
import { serviceTelemetry } from "../telemetry/telemetry.js";

const silent = { warn: () => undefined, error: () => undefined };
const NOW = new Date().toISOString();

/** A flow that says its payload, then waits at a gate the test opens. */
let open: (() => void) | null = null;
const gated = defineFlow({
  name: "gated",
  async *run(ctx) {
    yield step("say", "say");
    yield text(`You said ${ctx.payload}`);
    await new Promise<void>((resolve, reject) => {
      open = resolve;
      ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason), { once: true });
    });
    yield text(".");
    return { done: true };
  },
});

/** A flow that says hello, then waits, with every other run of it, until `release()`. */
let release: () => void = () => undefined;
let released = new Promise<void>((resolve) => {
  release = resolve;
});
const waiting = defineFlow({
  name: "waiting",
  async *run() {
    yield step("say", "say");
    yield text("hello");
    await released;
    return null;
  },
});

async function setup() {
  open = null;
  const storage = memoryStorage();
  const tenantId = crypto.randomUUID();
  await storage.createTenant({ id: tenantId, name: "start", createdAt: NOW });
  const channel: ChannelRecord = {
    id: crypto.randomUUID(),
    tenantId,
    name: null,
    type: "api",
    mode: "server",
    environment: "prod",
    state: "active",
    flowName: "gated",
    allowedOrigins: [],
    defaultStream: false,
    requireSignature: false,
    signingSecretEncrypted: null,
    apiKeyHint: "svc_live_****abcd",
    clientId: null,
    languages: [],
    livechatMessages: {},
    livechatWaitTimeoutSeconds: null,
    runTimeoutSeconds: null,
    resumableStreams: false,
    rateLimits: null,
    widget: {},
    settings: {},
    sealedSettings: null,
    createdAt: NOW,
    updatedAt: NOW,
  };
  await storage.createChannel(channel, {
    id: crypto.randomUUID(),
    channelId: channel.id,
    tenantId,
    hash: crypto.randomUUID(),
    prefix: "svc_live_",
    environment: "prod",
    hint: "svc_live_****abcd",
    createdAt: NOW,
    expiresAt: null,
    revokedAt: null,
  });
  const flow: RegisteredFlow = { flow: gated, id: crypto.randomUUID(), name: "gated", version: null };
  const waitingFlow: RegisteredFlow = { flow: waiting, id: crypto.randomUUID(), name: "waiting", version: null };
  const plugins = new PluginRegistry(silent);
  const ctx: ServiceInternals = {
    plugins,
    basePath: "",
    storage,
    flows: new Map([
      ["gated", flow],
      ["waiting", waitingFlow],
    ]),
    secrets: createSecretBox("ab".repeat(32)),
    logger: silent,
    maxBodyBytes: 1024,
    historyLimit: 50,
    estimateTokens,
    lifecycle: new RunLifecycle({ logger: silent, leaseMs: 30_000 }),
    // Set below, as the service does: the runs act through the context they are part of.
    runs: undefined as never,
    // startRun runs no admin operation.
    admin: undefined as never,
    livechat: new LiveChat({ storage, feed: inProcessFeed(), provider: null, logger: silent, estimateTokens, hooks: plugins }),
    production: false,
    limits: new RateLimiter(null, memoryRateLimitStore(), 0),
    streams: new RunStreams({ store: undefined, feed: inProcessFeed(), logger: silent, leaseMs: 30_000 }),
    openStreams: new OpenStreams(null, () => undefined),
    telemetry: serviceTelemetry(),
  };
  ctx.runs = runsOf(ctx);
  const request = { signal: new AbortController().signal };
  const start = (payload: string, live: boolean, conversationId?: string) =>
    (async () => {
      const conversation = conversationId ? await storage.findConversation(conversationId) : null;
      return startRun(ctx, { channel, flow, conversation, payload, metadata: {}, request, live });
    })();
  /** A streamed run of `waiting` on a new conversation, a copy of the channel's record as a request reads one. */
  const startWaiting = () =>
    startRun(ctx, { channel: structuredClone(channel), flow: waitingFlow, conversation: null, payload: "hi", metadata: {}, request, live: true });
  return { storage, start, startWaiting, ctx, channel };
}

/** Pulls the run to its end, as a client reading it would. */
async function toEnd(run: StartedRun) {
  let step = await run.steps.next();
  while (!step.done) step = await run.steps.next();
  return step.value;
}

/** Resolves once the gated flow waits at its gate. */
async function atGate(): Promise<() => void> {
  for (let i = 0; i < 500; i++) {
    if (open) return open;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  throw new Error("the flow never reached its gate");
}

describe("startRun", () => {
  it("a streamed run that starts a conversation has stored it, with its user message, before its first part", async () => {
    const { storage, start } = await setup();
    const run = await start("hello", true);
    expect((await storage.listRecentMessages(run.conversationId, 10)).map((m) => [m.turnIndex, m.role, m.content])).toEqual([[0, "user", "hello"]]);
    // The run's row comes with its outcome (memoryStorage, as sqlite(): Storage.findRun).
    expect(await storage.findRun(run.runId)).toBeNull();
    const ended = toEnd(run);
    (await atGate())();
    expect(await ended).toMatchObject({ status: "success" });
    expect(await storage.findRun(run.runId)).toMatchObject({ status: "success" });
    expect((await storage.listRecentMessages(run.conversationId, 10)).map((m) => m.content)).toEqual(["hello", "You said hello."]);
  });

  it("a JSON run that starts a conversation is stored whole at its end: before, nobody can know its id", async () => {
    const { storage, start } = await setup();
    const run = await start("hello", false);
    const pending = toEnd(run);
    const release = await atGate();
    expect(await storage.findConversation(run.conversationId)).toBeNull();
    expect(await storage.findRun(run.runId)).toBeNull();
    release();
    expect(await pending).toMatchObject({ status: "success", result: { done: true } });
    expect(await storage.findRun(run.runId)).toMatchObject({ status: "success", executionOrder: ["say"] });
    expect((await storage.listRecentMessages(run.conversationId, 10)).map((m) => [m.turnIndex, m.content])).toEqual([
      [0, "hello"],
      [1, "You said hello."],
    ]);
    // The conversation goes on like any other: the next run takes the next ticket and turn.
    const next = await start("again", false, run.conversationId);
    open = null;
    const ended = toEnd(next);
    const again = await atGate();
    expect((await storage.listRecentMessages(run.conversationId, 10)).map((m) => m.content)).toEqual(["hello", "You said hello.", "again"]);
    again();
    expect(await ended).toMatchObject({ status: "success" });
  });

  it("a JSON run that starts a conversation and is cancelled is stored whole, cancelled, with its partial text", async () => {
    const { storage, start } = await setup();
    const run = await start("hello", false);
    const pending = toEnd(run);
    await atGate();
    run.cancel();
    expect(await pending).toMatchObject({ status: "cancelled" });
    expect(await storage.findRun(run.runId)).toMatchObject({ status: "cancelled" });
    expect((await storage.listRecentMessages(run.conversationId, 10)).map((m) => m.content)).toEqual(["hello", "You said hello"]);
  });
});

describe("startRun: memory per open stream (docs/benchmarks.md)", () => {
  it("a streamed run waiting in its flow keeps its driver, its flow and one pending step, and shares its channel's record", async () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const { startWaiting } = await setup();
    const count = 2000;
    const runs: StartedRun[] = [];
    const pending: Promise<unknown>[] = [];
    // Lazily made code and pools exist before the measure.
    for (let i = 0; i < 20; i++) await (await startWaiting()).steps.next();
    gc();
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < count; i++) {
      const run = await startWaiting();
      // text-start and text-delta: the flow then waits, and so does the step pulled after them.
      await run.steps.next();
      await run.steps.next();
      pending.push(run.steps.next());
      runs.push(run);
    }
    gc();
    gc();
    const perRun = (process.memoryUsage().heapUsed - before) / count;
    // About 5.1 KB, the memory storage's copies of the run's rows included; 7.5 KB with the
    // run and its flow loop as two async generators, a timer per run and a channel record per run.
    expect(perRun).toBeLessThan(6200);
    release();
    const ends = await Promise.all(pending);
    expect(ends).toHaveLength(count);
    expect(runs).toHaveLength(count);
    released = new Promise<void>((resolve) => {
      release = resolve;
    });
  });
});

describe("ctx.runs.start with flowEvents", () => {
  const toolFlow: RegisteredFlow = {
    id: crypto.randomUUID(),
    name: "tool",
    version: null,
    flow: defineFlow({
      name: "tool",
      async *run() {
        yield step("plan", "llm");
        yield text("Looking.");
        yield message("", { toolCalls: [{ id: "c1", name: "lookup", arguments: { q: 1 } }] });
        yield message("found", { role: "tool", toolCallId: "c1" });
        yield setState({ seen: true });
        yield text("Done.");
      },
    }),
  };

  /** The parts a run hands out, a flow event as its event's type. */
  async function partsOf(run: { steps: { next(): Promise<IteratorResult<{ type: string; event?: { type: string } }>> } }) {
    const parts: string[] = [];
    for (let next = await run.steps.next(); !next.done; next = await run.steps.next()) {
      parts.push(next.value.type === "flow-event" ? `event:${next.value.event?.type}` : next.value.type);
    }
    return parts;
  }

  it("hands out the flow's events after the text parts each made (a step or a tool call closes the text); without it, only text", async () => {
    const { ctx, channel } = await setup();
    const request = { signal: new AbortController().signal };
    const input = { channel, flow: toolFlow, conversation: null, payload: "q", request, live: true } as const;
    expect(await partsOf(await ctx.runs.start({ ...input, flowEvents: true }))).toEqual([
      "event:step",
      "text-start",
      "text-delta",
      "text-end",
      "event:message",
      "event:message",
      "event:state",
      "text-start",
      "text-delta",
      "text-end",
    ]);
    expect(await partsOf(await ctx.runs.start(input))).toEqual(["text-start", "text-delta", "text-end", "text-start", "text-delta", "text-end"]);
  });
});
