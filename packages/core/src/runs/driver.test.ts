import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { estimateTokens } from "../conversations/tokens.js";
import { defineFlow, type Flow } from "../flows/define.js";
import { handover, message, pause, setState, step, text } from "../flows/events.js";
import { memoryStorage } from "../storage/memory.js";
import type { BeginRunInput, ChannelRecord, RunConversation, RunTicket, Storage } from "../storage/types.js";
import { RunAbort } from "./abort.js";
import { claimOf, driveRun, type TextPart } from "./driver.js";
import { inProcessFeed } from "../livechat/feed.js";
import { LiveChat } from "../livechat/live-chat.js";
import { PluginRegistry } from "../plugin/registry.js";
import { RunLifecycle } from "./lifecycle.js";
import { isoTimestamp } from "./timestamp.js";
import { serviceTelemetry } from "../telemetry/telemetry.js";

const silent = { warn: () => undefined, error: () => undefined };

/** The run's abort, told by `signal` when given. */
function followSignal(signal?: AbortSignal): RunAbort {
  const abort = new RunAbort();
  if (signal?.aborted) abort.abort(signal.reason);
  else signal?.addEventListener("abort", () => abort.abort(signal.reason), { once: true });
  return abort;
}

/** Resolves when `signal` aborts, rejecting like a well-behaved async API would. */
function untilAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    signal.addEventListener("abort", () => reject(signal.reason), { once: true });
  });
}

const toolFlow = defineFlow({
  name: "tools",
  version: "3.1",
  async *run() {
    yield step("plan", "llm");
    yield message("", { toolCalls: [{ id: "call_1", name: "lookup", arguments: { q: "answer" } }] });
    yield step("lookup", "tool");
    yield message('{"answer":42}', { role: "tool", toolCallId: "call_1" });
    yield step("reply", "llm");
    yield text("The answer ");
    yield text("");
    yield text("is 42.");
    return { answer: 42 };
  },
});

const twoTexts = defineFlow({
  name: "two-texts",
  async *run() {
    yield text("before any step");
    yield step("first", "a");
    yield text("one");
    yield step("second", "b");
    yield text("two");
    yield step("first", "a");
    return null;
  },
});

const failing = defineFlow({
  name: "failing",
  async *run() {
    yield step("work", "worker");
    yield text("Working on it");
    throw new Error("boom");
  },
});

const throwsString = defineFlow({
  name: "throws-string",
  // biome-ignore lint/correctness/useYield: a flow that fails before its first part
  async *run(): AsyncGenerator<never, unknown, void> {
    throw "plain string";
  },
});

const asking = defineFlow({
  name: "asking",
  async *run() {
    yield step("ask", "question");
    yield pause("What is your name?");
    return { asked: true };
  },
});

const handingOver = defineFlow({
  name: "handing-over",
  async *run() {
    yield step("handover", "livechat");
    yield handover("Connecting you to an agent");
    return null;
  },
});

const silentHandover = defineFlow({
  name: "silent-handover",
  async *run() {
    yield handover();
    return null;
  },
});

interface Seen {
  state: unknown;
  isNew: boolean;
  history: { role: string; content: string }[];
  metadata: Record<string, unknown>;
}
const seen: Seen[] = [];
const counter = defineFlow<{ count: number }>({
  name: "counter",
  async *run(ctx) {
    seen.push({
      state: ctx.state,
      isNew: ctx.isNewConversation,
      history: (await ctx.history()).map(({ role, content }) => ({ role, content })),
      metadata: ctx.metadata,
    });
    yield step("count", "counter");
    const count = (ctx.state?.count ?? 0) + 1;
    yield setState({ count: -1 });
    yield setState({ count });
    yield text(`count ${count}`);
    return { count };
  },
});

const readOnly = defineFlow<{ count: number }>({
  name: "read-only",
  async *run(ctx) {
    yield text(`still ${ctx.state?.count}`);
    return ctx.state ?? null;
  },
});

const cooperative = defineFlow({
  name: "cooperative",
  async *run(ctx) {
    yield step("talk", "llm");
    yield text("partial ");
    yield text("answer");
    await untilAborted(ctx.signal);
    yield text(" never sent");
    return "unreachable";
  },
});

/** Resolved when the stubborn flow is suspended in its never-settling await. */
let stuck: () => void = () => undefined;
const stubborn = defineFlow({
  name: "stubborn",
  async *run() {
    yield step("talk", "llm");
    yield text("partial");
    stuck();
    // Ignores ctx.signal entirely and never settles.
    await new Promise<never>(() => undefined);
    return "unreachable";
  },
});

const endless = defineFlow({
  name: "endless",
  async *run() {
    yield step("spin", "loop");
    for (let i = 0; ; i++) yield text(`${i} `);
  },
});

/** Lets a gated flow run past its gate; set per test. */
let gates = new Map<string, () => void>();
/** Waits at its gate (named by the payload) until the test opens it, then answers. */
const gated = defineFlow<{ count: number }>({
  name: "gated",
  async *run(ctx) {
    yield step("wait", "gate");
    await new Promise<void>((resolve) => gates.set(ctx.payload, resolve));
    yield text(`passed ${ctx.payload}`);
    yield setState({ count: (ctx.state?.count ?? 0) + 1 });
    return null;
  },
});

const NOW = new Date().toISOString();
const LEASE_MS = 30_000;
let storage: Storage;
let channel: ChannelRecord;

beforeAll(async () => {
  storage = memoryStorage();
  const tenant = { id: randomUUID(), name: "Driver tests", createdAt: NOW };
  await storage.createTenant(tenant);
  channel = {
    id: randomUUID(),
    tenantId: tenant.id,
    name: null,
    type: "api",
    mode: "server",
    environment: "staging",
    state: "active",
    flowName: "tools",
    allowedOrigins: [],
    defaultStream: true,
    requireSignature: false,
    signingSecretEncrypted: null,
    apiKeyHint: "svc_test_****abcd",
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
    id: randomUUID(),
    channelId: channel.id,
    tenantId: tenant.id,
    hash: randomUUID(),
    prefix: "svc_test_",
    environment: "staging",
    hint: "svc_test_****abcd",
    createdAt: NOW,
    expiresAt: null,
    revokedAt: null,
  });
});

interface RunOptions {
  conversationId?: string;
  payload?: string;
  metadata?: Record<string, unknown>;
  signal?: AbortSignal;
  /** Called with each part as it is produced, e.g. to abort mid-run. */
  onPart?: (part: TextPart, index: number) => void;
  /** False for a run answered as JSON (default true). */
  live?: boolean;
  /** The lifecycle of the "instance" running it (default: one shared by the tests, 30 s leases). */
  lifecycle?: RunLifecycle;
  /** Where handovers go (default: a provider that always takes them). */
  livechat?: LiveChat;
  /** The storage the run drives (default: the tests' own), e.g. one of a stalled instance. */
  storage?: Storage;
}

const shared = new RunLifecycle({ logger: silent, leaseMs: LEASE_MS });
/** The plugins that hear of runs: none here. */
const hooks = new PluginRegistry(silent);

/** A run as `startRun` starts one: it takes its ticket (and its turn, if free), then the driver drives it. */
async function begin(flow: Flow<any>, options: RunOptions = {}) {
  const runId = randomUUID();
  const lifecycle = options.lifecycle ?? shared;
  const conversation: RunConversation = {
    id: options.conversationId ?? randomUUID(),
    tenantId: channel.tenantId,
    channelId: channel.id,
    isNew: options.conversationId === undefined,
  };
  const base = { flow, channel, runId, conversation, payload: options.payload ?? "hello", estimateTokens, messageMetadata: null };
  const arrivedMs = Date.now();
  const ticket = await ticketOf(storage, claimOf(base, arrivedMs, lifecycle.leaseMs));
  const abort = followSignal(options.signal);
  const generator = driveRun(
    {
      ...base,
      ticket: ticket.ticket,
      begun: true,
      livechat: options.livechat ?? new LiveChat({ storage, feed: inProcessFeed(), provider: { id: "test" }, logger: silent, estimateTokens }),
      trigger: "message",
      claimedAtMs: arrivedMs,
      telemetry: serviceTelemetry(),
      trace: null,
      metadata: options.metadata,
      abort,
      storage: options.storage ?? storage,
      lifecycle,
      historyLimit: 50,
      live: options.live ?? true,
      streamEnding: { current: null },
      stream: undefined,
      hooks,
    },
    ticket.claimed,
  );
  const finished = (async () => {
    const parts: TextPart[] = [];
    let next = await generator.next();
    while (!next.done) {
      parts.push(next.value);
      options.onPart?.(next.value, parts.length - 1);
      next = await generator.next();
    }
    const outcome = next.value;
    const messages = await storage.listRecentMessages(conversation.id, 1000);
    const stored = await storage.findRun(runId);
    const found = await storage.findConversation(conversation.id);
    return { runId, conversationId: conversation.id, parts, outcome, messages, stored, conversation: found };
  })();
  return { runId, conversationId: conversation.id, ticket, abort, finished };
}

async function run(flow: Flow<any>, options: RunOptions = {}) {
  return (await begin(flow, options)).finished;
}

/** Resolves once the gated flow of `payload` waits at its gate. */
async function atGate(payload: string): Promise<() => void> {
  for (let i = 0; i < 500; i++) {
    const open = gates.get(payload);
    if (open) return open;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  throw new Error(`the flow of ${payload} never reached its gate`);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function expectContiguous(turns: number[]) {
  expect(turns).toEqual(turns.map((_, i) => i));
}

describe("driveRun: messages", () => {
  it("stores the user message first, then each produced message with its step, node type and tool fields", async () => {
    const { runId, outcome, messages, parts } = await run(toolFlow, { payload: "What is the answer?" });
    expect(outcome.status).toBe("success");
    expectContiguous(messages.map((m) => m.turnIndex));
    expect(messages.map((m) => [m.role, m.content])).toEqual([
      ["user", "What is the answer?"],
      ["assistant", ""],
      ["tool", '{"answer":42}'],
      ["assistant", "The answer is 42."],
    ]);
    const [user, call, tool, reply] = messages as [(typeof messages)[0], (typeof messages)[0], (typeof messages)[0], (typeof messages)[0]];
    expect(user).toMatchObject({ origin: "agent", runId, stepId: null, nodeType: null, toolCalls: null, toolCallId: null, tokenCount: 5 });
    expect(call).toMatchObject({ nodeType: "llm", toolCalls: [{ id: "call_1", name: "lookup", arguments: { q: "answer" } }], toolCallId: null });
    expect(tool).toMatchObject({ nodeType: "tool", toolCallId: "call_1", toolCalls: null });
    expect(reply).toMatchObject({ nodeType: "llm", toolCalls: null, tokenCount: Math.ceil("The answer is 42.".length / 4) });
    for (const produced of [call, tool, reply]) {
      expect(produced.runId).toBe(runId);
      expect(produced.origin).toBe("agent");
      expect(produced.stepId).toMatch(/^[0-9a-f-]{36}$/);
      expect(produced.livechatMessageId).toBeNull();
      expect(produced.sender).toBeNull();
    }
    // Each step gets its own id.
    expect(new Set([call.stepId, tool.stepId, reply.stepId]).size).toBe(3);

    // The live parts: the tool calls send no text, the reply is streamed.
    expect(parts.map((p) => p.type)).toEqual(["text-start", "text-delta", "text-delta", "text-end"]);
    const replyId = parts[0]?.id;
    expect(parts.every((p) => p.id === replyId)).toBe(true);
    expect(parts.flatMap((p) => (p.type === "text-delta" ? [p.delta] : []))).toEqual(["The answer ", "is 42."]);
    expect(outcome.produced.map((m) => m.content)).toEqual(["", '{"answer":42}', "The answer is 42."]);
  });

  it("yields no parts for a run answered as JSON, and stores the same messages", async () => {
    const streamed = await run(toolFlow, { payload: "What is the answer?" });
    const whole = await run(toolFlow, { payload: "What is the answer?", live: false });
    expect(whole.parts).toEqual([]);
    expect(whole.outcome.status).toBe("success");
    const shape = (messages: typeof streamed.messages) => messages.map((m) => [m.turnIndex, m.role, m.content, m.nodeType, m.toolCalls, m.toolCallId]);
    expect(shape(whole.messages)).toEqual(shape(streamed.messages));
    expect(whole.outcome.produced.map((m) => m.content)).toEqual(streamed.outcome.produced.map((m) => m.content));
  });

  it("stores the run record: status, flow, result, execution order and times", async () => {
    const { runId, conversationId, stored, outcome } = await run(toolFlow);
    expect(stored).toMatchObject({
      id: runId,
      conversationId,
      channelId: channel.id,
      tenantId: channel.tenantId,
      status: "success",
      flowName: "tools",
      flowVersion: "3.1",
      result: { answer: 42 },
      error: null,
      executionOrder: ["plan", "lookup", "reply"],
    });
    expect(stored?.startedAt).toBe(outcome.startedAt);
    expect(stored?.completedAt).toBe(outcome.completedAt);
    expect(Date.parse(stored?.completedAt ?? "")).toBeGreaterThanOrEqual(Date.parse(stored?.startedAt ?? ""));
    expect(stored?.durationMs).toBe(Date.parse(outcome.completedAt) - Date.parse(outcome.startedAt));
  });

  it("closes the open text at each step, so each step's text is its own message", async () => {
    const { messages, outcome, stored } = await run(twoTexts);
    expect(messages.map((m) => [m.role, m.content, m.nodeType])).toEqual([
      ["user", "hello", null],
      ["assistant", "before any step", null],
      ["assistant", "one", "a"],
      ["assistant", "two", "b"],
    ]);
    expect(messages[1]?.stepId).toBeNull();
    expect(outcome.executionOrder).toEqual(["first", "second", "first"]);
    expect(stored?.result).toBeNull();
  });

  it("continues turn indexes across runs of one conversation", async () => {
    const first = await run(toolFlow);
    const second = await run(twoTexts, { conversationId: first.conversationId });
    expect(second.messages).toHaveLength(8);
    expectContiguous(second.messages.map((m) => m.turnIndex));
    expect(second.messages[4]).toMatchObject({ role: "user", turnIndex: 4, runId: second.runId });
    expect(second.conversation?.nextTurn).toBe(8);
  });
});

describe("driveRun: outcomes", () => {
  it("stores a flow that throws as error, with its message and the partial text", async () => {
    const { outcome, stored, messages, parts } = await run(failing);
    expect(outcome.status).toBe("error");
    expect(outcome.error).toBe("boom");
    expect(outcome.result).toBeNull();
    expect(stored).toMatchObject({ status: "error", error: "boom", result: null, executionOrder: ["work"] });
    expect(messages.map((m) => [m.role, m.content, m.nodeType])).toEqual([
      ["user", "hello", null],
      ["assistant", "Working on it", "worker"],
    ]);
    // The partial message is properly closed before the stream reports the error.
    expect(parts.map((p) => p.type)).toEqual(["text-start", "text-delta", "text-end"]);
  });

  it("reports a thrown non-Error as its string", async () => {
    const { outcome, stored } = await run(throwsString);
    expect(outcome.status).toBe("error");
    expect(stored?.error).toBe("plain string");
  });

  it("stores a pause as pending with the question as the assistant message", async () => {
    const { outcome, stored, messages, conversation, parts } = await run(asking);
    expect(outcome.status).toBe("pending");
    expect(outcome.livechatMode).toBeNull();
    expect(stored).toMatchObject({ status: "pending", result: { asked: true } });
    expect(messages.map((m) => [m.role, m.content, m.nodeType])).toEqual([
      ["user", "hello", null],
      ["assistant", "What is your name?", "question"],
    ]);
    expect(conversation?.mode).toBe("bot");
    expect(parts.filter((p) => p.type === "text-delta").map((p) => p.type === "text-delta" && p.delta)).toEqual(["What is your name?"]);
  });

  it("stores a handover as pending and puts the conversation in livechat_waiting", async () => {
    const { outcome, stored, messages, conversation } = await run(handingOver);
    expect(outcome.status).toBe("pending");
    expect(outcome.livechatMode).toBe("livechat_waiting");
    expect(stored?.status).toBe("pending");
    expect(conversation?.mode).toBe("livechat_waiting");
    expect(messages.map((m) => m.content)).toEqual(["hello", "Connecting you to an agent"]);
  });

  it("hands over without a message when none is given", async () => {
    const { outcome, messages, parts, conversation } = await run(silentHandover);
    expect(outcome.status).toBe("pending");
    expect(parts).toEqual([]);
    expect(messages.map((m) => m.role)).toEqual(["user"]);
    expect(conversation?.mode).toBe("livechat_waiting");
  });

  it("without a provider, a handover is unavailable: the run succeeds, the bot keeps the conversation in livechat_unavailable", async () => {
    const nobody = new LiveChat({ storage, feed: inProcessFeed(), provider: null, logger: silent, estimateTokens });
    const { outcome, stored, conversation, messages } = await run(handingOver, { livechat: nobody });
    expect(outcome.status).toBe("success");
    expect(outcome.livechatMode).toBeNull();
    expect(stored?.status).toBe("success");
    expect(conversation?.mode).toBe("livechat_unavailable");
    expect(conversation?.livechatConversationId).toBeNull();
    expect(messages.map((m) => m.content)).toEqual(["hello", "Connecting you to an agent"]);
  });

  it("a provider that says nobody is available makes the handover unavailable too", async () => {
    const closedDesk = new LiveChat({ storage, feed: inProcessFeed(), provider: { id: "closed", available: () => false }, logger: silent, estimateTokens });
    const { outcome, conversation } = await run(handingOver, { livechat: closedDesk });
    expect(outcome.status).toBe("success");
    expect(conversation?.mode).toBe("livechat_unavailable");
  });
});

describe("driveRun: flow state and history", () => {
  it("gives a flow a context it may destructure: history and signal work unbound (the context is a class: docs/benchmarks.md)", async () => {
    const destructuring = defineFlow({
      name: "destructuring",
      async *run({ payload, history, signal, conversationId, channel }) {
        const earlier = await history(10);
        yield text(`${payload}|${earlier.map((m) => m.content).join(",")}|${signal.aborted}|${typeof conversationId}|${channel.type}`);
        return null;
      },
    });
    const first = await run(destructuring, { payload: "one" });
    expect(first.outcome.produced.map((m) => m.content)).toEqual(["one||false|string|api"]);
    const second = await run(destructuring, { conversationId: first.conversationId, payload: "two" });
    expect(second.outcome.produced.map((m) => m.content)).toEqual(["two|one,one||false|string|api|false|string|api"]);
  });

  it("persists the last setState and hands it back on the next run, with the history", async () => {
    seen.length = 0;
    const first = await run(counter, { metadata: { plan: "pro" } });
    expect(first.outcome.result).toEqual({ count: 1 });
    expect(first.conversation?.flowState).toEqual({ count: 1 });

    const second = await run(counter, { conversationId: first.conversationId, payload: "again" });
    expect(second.outcome.result).toEqual({ count: 2 });
    expect(second.conversation?.flowState).toEqual({ count: 2 });

    expect(seen).toEqual([
      { state: undefined, isNew: true, history: [], metadata: { plan: "pro" } },
      {
        state: { count: 1 },
        isNew: false,
        history: [
          { role: "user", content: "hello" },
          { role: "assistant", content: "count 1" },
        ],
        metadata: {},
      },
    ]);
  });

  it("keeps the stored state when a run does not set it", async () => {
    const first = await run(counter);
    const second = await run(readOnly, { conversationId: first.conversationId });
    expect(second.outcome.result).toEqual({ count: 1 });
    expect(second.conversation?.flowState).toEqual({ count: 1 });
    expect(second.messages.at(-1)?.content).toBe("still 1");
  });
});

describe("driveRun: cancellation", () => {
  it("stores an aborted run as cancelled with the partial text, and stops the stream", async () => {
    const controller = new AbortController();
    const { outcome, stored, messages, parts } = await run(cooperative, {
      signal: controller.signal,
      onPart: (part) => {
        if (part.type === "text-delta" && part.delta === "answer") controller.abort(new Error("client gone"));
      },
    });
    expect(outcome.status).toBe("cancelled");
    expect(outcome.result).toBeNull();
    expect(stored).toMatchObject({ status: "cancelled", error: null, result: null, executionOrder: ["talk"] });
    expect(messages.map((m) => [m.role, m.content, m.nodeType])).toEqual([
      ["user", "hello", null],
      ["assistant", "partial answer", "llm"],
    ]);
    expect(messages[1]?.stepId).not.toBeNull();
    // The text is closed (a resumed stream's followers read on), and nothing comes after.
    expect(parts.map((p) => p.type)).toEqual(["text-start", "text-delta", "text-delta", "text-end"]);
  });

  it("cancels promptly a flow that ignores the signal and never settles", async () => {
    const controller = new AbortController();
    let abortedAt = 0;
    // Abort only once the driver is waiting on the flow, not between two parts.
    const suspended = new Promise<void>((resolve) => {
      stuck = resolve;
    });
    void suspended.then(() => {
      abortedAt = performance.now();
      controller.abort();
    });
    const running = run(stubborn, { signal: controller.signal });
    const timeout = new Promise<"timeout">((resolve) => setTimeout(resolve, 5000, "timeout").unref());
    const result = await Promise.race([running, timeout]);
    if (result === "timeout") throw new Error("the driver waited for a flow that ignores the abort signal");
    expect(abortedAt).toBeGreaterThan(0);
    expect(performance.now() - abortedAt).toBeLessThan(1000);
    expect(result.outcome.status).toBe("cancelled");
    expect(result.stored?.status).toBe("cancelled");
    expect(result.messages.map((m) => m.content)).toEqual(["hello", "partial"]);
    expect(result.parts.map((p) => p.type)).toEqual(["text-start", "text-delta", "text-end"]);
  });

  it("stops a flow that keeps yielding without awaiting anything", async () => {
    const controller = new AbortController();
    const { outcome, messages, parts } = await run(endless, {
      signal: controller.signal,
      onPart: (_part, index) => {
        if (index === 3) controller.abort();
      },
    });
    expect(outcome.status).toBe("cancelled");
    // Four parts, then the text's end.
    expect(parts).toHaveLength(5);
    expect(parts.at(-1)?.type).toBe("text-end");
    expect(messages.map((m) => m.content)).toEqual(["hello", "0 1 2 "]);
  });

  it("stores a run whose signal is already aborted as cancelled, without running the flow", async () => {
    seen.length = 0;
    const { outcome, stored, messages, parts, conversation } = await run(counter, { signal: AbortSignal.abort() });
    expect(outcome.status).toBe("cancelled");
    expect(stored?.status).toBe("cancelled");
    expect(parts).toEqual([]);
    expect(messages.map((m) => m.role)).toEqual(["user"]);
    expect(conversation?.flowState).toBeUndefined();
    expect(seen).toEqual([]);
  });
});

describe("driveRun: taking turns", () => {
  it("makes a run that arrives while another runs wait, then start from the state and history the first stored", async () => {
    gates = new Map();
    const first = await begin(gated, { payload: "first" });
    expect(first.ticket.ticket).toBe(0);
    const open = await atGate("first");
    seen.length = 0;
    const second = await begin(counter, { conversationId: first.conversationId, payload: "second" });
    expect(second.ticket).toEqual({ ticket: 1, claimed: null });
    await sleep(30);
    // The second run has not started: its flow has not run and its user message is not stored.
    expect(seen).toEqual([]);
    expect(await storage.findRun(second.runId)).toBeNull();
    expect((await storage.listRecentMessages(first.conversationId, 10)).map((m) => m.content)).toEqual(["first"]);

    open();
    const [one, two] = await Promise.all([first.finished, second.finished]);
    expect(one.outcome.status).toBe("success");
    expect(two.outcome.status).toBe("success");
    // The counter saw the gated run's state ({ count: 1 }) and its messages.
    expect(seen).toEqual([
      {
        state: { count: 1 },
        isNew: false,
        history: [
          { role: "user", content: "first" },
          { role: "assistant", content: "passed first" },
        ],
        metadata: {},
      },
    ]);
    expect(two.outcome.result).toEqual({ count: 2 });
    expect(two.messages.map((m) => [m.turnIndex, m.content])).toEqual([
      [0, "first"],
      [1, "passed first"],
      [2, "second"],
      [3, "count 2"],
    ]);
    // The second run's times start when it got its turn, not when it arrived.
    expect(Date.parse(two.stored?.startedAt ?? "")).toBeGreaterThanOrEqual(Date.parse(one.stored?.completedAt ?? ""));
  });

  it("a run whose ticket was passed over while its instance stalled queues again, and is answered after the run that took the turn", async () => {
    gates = new Map();
    // The holder's instance gives the next ticket 100 ms to claim the turn it passes.
    const first = await begin(gated, { payload: "holder", lifecycle: new RunLifecycle({ logger: silent, leaseMs: 100 }) });
    const open = await atGate("holder");
    // The second run's instance stalls: its looks at the queue wait until released.
    let unstall!: () => void;
    const stalled = new Promise<void>((resolve) => {
      unstall = resolve;
    });
    const stalledStorage: Storage = { ...storage, claimTurn: async (input) => stalled.then(() => storage.claimTurn(input)) };
    const second = await begin(counter, { conversationId: first.conversationId, payload: "stalled", storage: stalledStorage });
    const third = await begin(counter, { conversationId: first.conversationId, payload: "third" });
    expect([second.ticket.ticket, third.ticket.ticket]).toEqual([1, 2]);

    open();
    // The third run finds the second's claim time lapsed, takes the turn past it, and ends.
    const done = await third.finished;
    expect(done.outcome.status).toBe("success");
    unstall();
    const late = await second.finished;
    expect(late.outcome.status).toBe("success");
    expect(late.messages.map((m) => m.content)).toEqual(["holder", "passed holder", "third", "count 2", "stalled", "count 3"]);
    expectContiguous(late.messages.map((m) => m.turnIndex));
  });

  it("stores a run aborted while it waits as cancelled in its turn, after the run before it, without running its flow", async () => {
    gates = new Map();
    const first = await begin(gated, { payload: "holder" });
    const open = await atGate("holder");
    const controller = new AbortController();
    seen.length = 0;
    const gone = await begin(counter, { conversationId: first.conversationId, payload: "gone", signal: controller.signal });
    const third = await begin(counter, { conversationId: first.conversationId, payload: "third" });
    expect([gone.ticket.ticket, third.ticket.ticket]).toEqual([1, 2]);
    await sleep(10);
    controller.abort();
    let goneStored = false;
    void gone.finished.then(() => {
      goneStored = true;
    });
    await sleep(50);
    // Its turn has not come: nothing of it is stored yet, and the holder's answer will come first.
    expect(goneStored).toBe(false);
    expect((await storage.listRecentMessages(first.conversationId, 10)).map((m) => m.content)).toEqual(["holder"]);

    open();
    await first.finished;
    const cancelled = await gone.finished;
    expect(cancelled.outcome.status).toBe("cancelled");
    expect(cancelled.parts).toEqual([]);
    expect(cancelled.stored).toMatchObject({ status: "cancelled", error: null, executionOrder: [] });
    const last = await third.finished;
    expect(last.outcome.status).toBe("success");
    // The cancelled run's flow never ran, and its state was never stored.
    expect(seen).toHaveLength(1);
    expect(seen[0]?.state).toEqual({ count: 1 });
    expect(last.messages.map((m) => [m.turnIndex, m.content])).toEqual([
      [0, "holder"],
      [1, "passed holder"],
      [2, "gone"],
      [3, "third"],
      [4, "count 2"],
    ]);
  });

  it("while its service closes, a run aborted while it waits gives its turn up at once, its user message stored", async () => {
    gates = new Map();
    const closing = new RunLifecycle({ logger: silent, leaseMs: LEASE_MS });
    // The turn is held by a run of another instance, which this one's closing does not stop.
    const first = await begin(gated, { payload: "elsewhere" });
    const open = await atGate("elsewhere");
    const controller = new AbortController();
    const waiting = await begin(counter, { conversationId: first.conversationId, payload: "here", lifecycle: closing, signal: controller.signal });
    expect(waiting.ticket.claimed).toBeNull();
    controller.abort();
    await sleep(30);
    expect((await storage.listRecentMessages(first.conversationId, 10)).map((m) => m.content)).toEqual(["elsewhere"]);
    const started = Date.now();
    await closing.close();
    const cancelled = await waiting.finished;
    expect(Date.now() - started).toBeLessThan(1000);
    expect(cancelled.outcome.status).toBe("cancelled");
    expect(cancelled.messages.map((m) => [m.turnIndex, m.content])).toEqual([
      [0, "elsewhere"],
      [1, "here"],
    ]);
    open();
    const holder = await first.finished;
    expect(holder.messages.map((m) => m.content)).toEqual(["elsewhere", "here", "passed elsewhere"]);
  });

  it("takes over the turn of a run whose instance stopped once its lease lapses", async () => {
    const instance = new RunLifecycle({ logger: silent, leaseMs: 60 });
    // A run claimed on an instance that then stopped: nobody renews or completes it.
    const conversation: RunConversation = { id: randomUUID(), tenantId: channel.tenantId, channelId: channel.id, isNew: true };
    const staleId = randomUUID();
    const nowMs = Date.now();
    await ticketOf(
      storage,
      claimOf({ flow: gated, channel, runId: staleId, conversation, payload: "stale", estimateTokens, messageMetadata: null }, nowMs, 60),
    );
    const started = Date.now();
    const next = await begin(readOnly, { conversationId: conversation.id, lifecycle: instance });
    expect(next.ticket.claimed).toBeNull();
    const result = await next.finished;
    expect(Date.now() - started).toBeGreaterThanOrEqual(50);
    expect(result.outcome.status).toBe("success");
    const stale = await storage.findRun(staleId);
    expect(stale).toMatchObject({ status: "cancelled" });
    expect(stale?.error).toMatch(/^The run was abandoned/);
    expect(Date.parse(stale?.completedAt ?? "")).toBeGreaterThan(Date.parse(isoTimestamp(nowMs + 59)));
    expect(result.messages.map((m) => [m.turnIndex, m.content])).toEqual([
      [0, "stale"],
      [1, "hello"],
      [2, "still undefined"],
    ]);
  });

  it("renews its lease while it runs, so a waiting run on another instance does not take its turn over", async () => {
    gates = new Map();
    const leaseMs = 60;
    const mine = new RunLifecycle({ logger: silent, leaseMs });
    const other = new RunLifecycle({ logger: silent, leaseMs });
    const first = await begin(gated, { payload: "long", lifecycle: mine });
    const open = await atGate("long");
    const second = await begin(readOnly, { conversationId: first.conversationId, lifecycle: other });
    // Several leases long: only the renewals keep the turn.
    await sleep(leaseMs * 4);
    expect(await storage.findRun(second.runId)).toBeNull();
    open();
    const [one, two] = await Promise.all([first.finished, second.finished]);
    expect(one.stored?.status).toBe("success");
    expect(two.outcome.status).toBe("success");
    expect(two.messages.map((m) => m.content)).toEqual(["long", "passed long", "hello", "still 1"]);
  });
});

/** The ticket of a run that must get one (`beginRun` answers null only for a conversation that is not the run's). */
async function ticketOf(storage: Pick<Storage, "beginRun">, input: BeginRunInput): Promise<RunTicket> {
  const ticket = await storage.beginRun(input);
  if (ticket === null) throw new Error(`beginRun: conversation ${input.conversation.id} is not the run's`);
  return ticket;
}
