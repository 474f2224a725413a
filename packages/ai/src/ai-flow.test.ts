import { randomUUID } from "node:crypto";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ChannelService, createChannelService, type Flow, liveChatInbox } from "@channelkit/core";
import { type KyselyStorage, sqlite } from "@channelkit/kysely";
import { type RunningServer, serve } from "@channelkit/node";
import type { LanguageModelV3StreamPart } from "@ai-sdk/provider";
import { APICallError, createUIMessageStream, simulateReadableStream, tool } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { aiFlow } from "./ai-flow.js";
import { askUserTool, handoverTool } from "./human.js";
import { fromUIMessageStream } from "./ui-stream-flow.js";

/*
 * aiFlow and fromUIMessageStream behind a real server on 127.0.0.1 and a real SQLite file,
 * with the AI SDK's own mock model: no network. Each test binds its flow to a channel of
 * its own; the flows are registered once, since a service's flows are fixed.
 */

const USAGE = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
};

/** A model call that answers `words` as text. */
function says(...words: string[]): { stream: ReadableStream<LanguageModelV3StreamPart> } {
  return {
    stream: simulateReadableStream<LanguageModelV3StreamPart>({
      chunks: [
        { type: "stream-start", warnings: [] },
        { type: "text-start", id: "t" },
        ...words.map((delta) => ({ type: "text-delta" as const, id: "t", delta })),
        { type: "text-end", id: "t" },
        { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage: USAGE },
      ],
    }),
  };
}

/** A model call that says `preamble` (if any), then calls `toolName` with `input`. */
function calls(toolCallId: string, toolName: string, input: unknown, preamble?: string): { stream: ReadableStream<LanguageModelV3StreamPart> } {
  return {
    stream: simulateReadableStream<LanguageModelV3StreamPart>({
      chunks: [
        { type: "stream-start", warnings: [] },
        ...(preamble
          ? [
              { type: "text-start" as const, id: "p" },
              { type: "text-delta" as const, id: "p", delta: preamble },
              { type: "text-end" as const, id: "p" },
            ]
          : []),
        { type: "tool-call", toolCallId, toolName, input: JSON.stringify(input) },
        { type: "finish", finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage: USAGE },
      ],
    }),
  };
}

/** Models whose calls each test queues: a flow's model takes the next answer of its queue. */
function queuedModel() {
  const answers: (() => { stream: ReadableStream<LanguageModelV3StreamPart> })[] = [];
  const model = new MockLanguageModelV3({
    doStream: async () => {
      const next = answers.shift();
      if (!next) throw new Error("the test queued no answer for this model call");
      return next();
    },
  });
  return { model, answers };
}

const orders = new Map([[7, { status: "shipped", carrier: "DHL" }]]);
const lookupOrder = tool({
  description: "Looks an order up",
  inputSchema: z.object({ id: z.number() }),
  execute: async ({ id }) => {
    const order = orders.get(id);
    if (!order) throw new Error(`no order ${id}`);
    return order;
  },
});

const plain = queuedModel();
const agent = queuedModel();
const human = queuedModel();
const failing = queuedModel();

const flows: Flow[] = [
  aiFlow({ name: "plain", model: plain.model, system: "Be brief." }),
  aiFlow({ name: "agent", model: agent.model, system: "You look orders up.", tools: { lookupOrder } }),
  aiFlow({ name: "human", model: human.model, tools: { handover: handoverTool({ message: "A person will take it from here." }), ask: askUserTool() } }),
  aiFlow({ name: "failing", model: failing.model }),
  fromUIMessageStream({
    name: "hand-made",
    stream: () =>
      createUIMessageStream({
        execute: ({ writer }) => {
          writer.write({ type: "start-step" });
          writer.write({ type: "tool-input-available", toolCallId: "c1", toolName: "search", input: { q: "refunds" } });
          writer.write({ type: "tool-output-available", toolCallId: "c1", output: { hits: 2 } });
          writer.write({ type: "finish-step" });
          writer.write({ type: "start-step" });
          writer.write({ type: "text-start", id: "a" });
          writer.write({ type: "text-delta", id: "a", delta: "Refunds take 5 days." });
          writer.write({ type: "text-end", id: "a" });
          writer.write({ type: "data-citation", data: { doc: "refunds.md" } });
          writer.write({ type: "finish-step" });
        },
      }),
  }),
];

let storage: KyselyStorage;
let service: ChannelService;
let server: RunningServer;
let tenantId: string;
const file = join(tmpdir(), `channelkit-ai-${randomUUID()}.db`);

beforeAll(async () => {
  storage = sqlite(file);
  await storage.migrate();
  service = await createChannelService({
    storage,
    flows,
    secretKey: "ab".repeat(32),
    logger: { warn: () => undefined, error: () => undefined },
    livechat: liveChatInbox({ secret: "x".repeat(32) }),
  });
  server = await serve(service, { port: 0 });
  tenantId = (await service.admin.createTenant({ name: "AI" })).tenant.id;
});

afterAll(async () => {
  await server?.close();
  await service?.close();
  await Promise.all(["", "-wal", "-shm"].map((suffix) => rm(`${file}${suffix}`, { force: true })));
});

afterEach(() => {
  // A test that failed early leaves no answer for the next one.
  for (const { answers } of [plain, agent, human, failing]) answers.length = 0;
});

async function channel(flow: string): Promise<string> {
  return (await service.admin.createChannel({ tenantId, flow })).api_key;
}

function execute(key: string, body: Record<string, unknown>, signal?: AbortSignal): Promise<Response> {
  return fetch(`${server.url}/public/v1/api/execute`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });
}

interface Document {
  run_id: string;
  conversation_id: string;
  status: string;
  output: { result: unknown; messages: { role: string; content: string }[] } | null;
  error?: { code: string; message: string };
}

async function runJson(key: string, body: Record<string, unknown>): Promise<Document> {
  const response = await execute(key, body);
  expect(response.status).toBe(200);
  return (await response.json()) as Document;
}

interface HistoryMessage {
  role: string;
  content: string;
  node_type: string | null;
  run_id: string | null;
  tool_calls: { id: string; name: string; arguments: unknown }[] | null;
  tool_call_id: string | null;
  turn_index: number;
}

async function history(key: string, conversationId: string): Promise<HistoryMessage[]> {
  const response = await fetch(`${server.url}/public/v1/api/conversations/${conversationId}/messages?limit=200`, {
    headers: { authorization: `Bearer ${key}` },
  });
  expect(response.status).toBe(200);
  const { messages } = (await response.json()) as { messages: HistoryMessage[] };
  expect(messages.map((m) => m.turn_index)).toEqual(messages.map((_, i) => i));
  return messages;
}

/** The SSE events of a streamed answer, read to its end. */
async function events(response: Response): Promise<{ type: string; delta?: string; errorText?: string; data?: { run_id: string; conversation_id: string } }[]> {
  expect(response.headers.get("x-vercel-ai-ui-message-stream")).toBe("v1");
  return (await response.text())
    .split("\n\n")
    .filter(Boolean)
    .map((frame) => JSON.parse(frame.replace(/^data: /, "")));
}

describe("aiFlow", () => {
  it("streams the model's text, stores it as an llm step, and reports the tokens used in the run's result", async () => {
    const key = await channel("plain");
    plain.answers.push(() => says("Hello", " there", "!"));
    const streamed = await events(await execute(key, { payload: "hi", stream: true }));
    expect(streamed.map((e) => e.type)).toEqual(["data-run", "text-start", "text-delta", "text-delta", "text-delta", "text-end", "finish"]);
    expect(streamed.flatMap((e) => (e.delta ? [e.delta] : [])).join("")).toBe("Hello there!");
    const conversationId = streamed[0]?.data?.conversation_id as string;

    plain.answers.push(() => says("Again."));
    const document = await runJson(key, { payload: "once more", conversation_id: conversationId });
    expect(document).toMatchObject({
      status: "success",
      output: { result: { finishReason: "stop", steps: 1, usage: { inputTokens: 10, outputTokens: 5, totalTokens: 15 } } },
    });
    const stored = await storage.findRun(document.run_id);
    expect(stored?.executionOrder).toEqual(["llm"]);
    expect((await history(key, conversationId)).map((m) => [m.role, m.content, m.node_type])).toEqual([
      ["user", "hi", null],
      ["assistant", "Hello there!", "llm"],
      ["user", "once more", null],
      ["assistant", "Again.", "llm"],
    ]);
    // The system prompt, then the history with its roles, then the new message.
    const prompt = plain.model.doStreamCalls.at(-1)?.prompt;
    expect(prompt?.map((m) => m.role)).toEqual(["system", "user", "assistant", "user"]);
  });

  it("loops through tool calls until the model answers: calls on the assistant message, results as tool messages, steps in execution order; history feeds them back", async () => {
    const key = await channel("agent");
    agent.answers.push(
      () => calls("call_1", "lookupOrder", { id: 7 }, "Let me check."),
      () => says("Order 7 has shipped with DHL."),
    );
    const first = await runJson(key, { payload: "Where is order 7?" });
    expect(first.status).toBe("success");
    expect((await storage.findRun(first.run_id))?.executionOrder).toEqual(["llm", "lookupOrder", "llm"]);
    const stored = await history(key, first.conversation_id);
    expect(stored.map(({ role, content, node_type, tool_calls, tool_call_id }) => ({ role, content, node_type, tool_calls, tool_call_id }))).toEqual([
      { role: "user", content: "Where is order 7?", node_type: null, tool_calls: null, tool_call_id: null },
      {
        role: "assistant",
        content: "Let me check.",
        node_type: "llm",
        tool_calls: [{ id: "call_1", name: "lookupOrder", arguments: { id: 7 } }],
        tool_call_id: null,
      },
      { role: "tool", content: '{"status":"shipped","carrier":"DHL"}', node_type: "tool", tool_calls: null, tool_call_id: "call_1" },
      { role: "assistant", content: "Order 7 has shipped with DHL.", node_type: "llm", tool_calls: null, tool_call_id: null },
    ]);
    expect(first.output?.result).toMatchObject({ steps: 2, usage: { totalTokens: 30 } });

    // A tool that throws: its error goes back to the model, which answers; the run succeeds.
    agent.answers.push(
      () => calls("call_2", "lookupOrder", { id: 99 }),
      () => says("I cannot find order 99."),
    );
    const second = await runJson(key, { payload: "And order 99?", conversation_id: first.conversation_id });
    expect(second.status).toBe("success");
    // The answer's messages are the reply's text, as streamed: a step that only called a tool has none.
    expect(first.output?.messages).toEqual([
      { role: "assistant", content: "Let me check." },
      { role: "assistant", content: "Order 7 has shipped with DHL." },
    ]);
    expect(second.output?.messages).toEqual([{ role: "assistant", content: "I cannot find order 99." }]);
    const after = await history(key, first.conversation_id);
    expect(after.slice(4).map(({ role, content, tool_call_id }) => [role, content, tool_call_id])).toEqual([
      ["user", "And order 99?", null],
      ["assistant", "", null],
      ["tool", '{"error":"no order 99"}', "call_2"],
      ["assistant", "I cannot find order 99.", null],
    ]);
    expect(after[5]?.tool_calls).toEqual([{ id: "call_2", name: "lookupOrder", arguments: { id: 99 } }]);

    // The second run's first model call saw the first run whole, tool call and result included.
    const prompt = agent.model.doStreamCalls.at(-2)?.prompt ?? [];
    expect(prompt.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "assistant", "user"]);
    expect(prompt[2]?.content).toEqual([
      { type: "text", text: "Let me check." },
      expect.objectContaining({ type: "tool-call", toolCallId: "call_1", toolName: "lookupOrder", input: { id: 7 } }),
    ]);
    expect(prompt[3]?.content).toEqual([
      expect.objectContaining({
        type: "tool-result",
        toolCallId: "call_1",
        toolName: "lookupOrder",
        output: { type: "json", value: { status: "shipped", carrier: "DHL" } },
      }),
    ]);
  });

  it("a client gone mid-stream aborts the model call: the run is stored cancelled with the partial text", async () => {
    const key = await channel("plain");
    plain.answers.push(() => ({
      stream: new ReadableStream<LanguageModelV3StreamPart>({
        async start(controller) {
          controller.enqueue({ type: "stream-start", warnings: [] });
          controller.enqueue({ type: "text-start", id: "t" });
          controller.enqueue({ type: "text-delta", id: "t", delta: "Once upon " });
        },
      }),
    }));
    const client = new AbortController();
    const response = await execute(key, { payload: "tell a story", stream: true }, client.signal);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    let seen = "";
    while (!seen.includes("Once upon")) seen += new TextDecoder().decode((await reader.read()).value);
    const runId = (JSON.parse(seen.slice(6, seen.indexOf("\n\n"))) as { data: { run_id: string } }).data.run_id;
    client.abort();
    let run = await storage.findRun(runId);
    // Not stored until its outcome is (sqlite(): Storage.findRun), then cancelled.
    for (let waited = 0; (!run || run.status === "running") && waited < 3000; waited += 20) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      run = await storage.findRun(runId);
    }
    expect(run?.status).toBe("cancelled");
    // The run's signal reached the model call.
    expect(plain.model.doStreamCalls.at(-1)?.abortSignal?.aborted).toBe(true);
    const messages = await history(key, run?.conversationId as string);
    expect(messages.map((m) => [m.role, m.content])).toEqual([
      ["user", "tell a story"],
      ["assistant", "Once upon "],
    ]);
  });

  it("a provider error after the first byte ends the stream with an error event that names neither the key nor the prompt; the run is stored as an error", async () => {
    const key = await channel("failing");
    const secret = "sk-live-0123456789abcdef";
    const apiError = () =>
      new APICallError({
        message: `Incorrect API key provided: ${secret}`,
        url: "https://api.example/v1/chat",
        requestBodyValues: { prompt: "the user's secret question" },
        statusCode: 401,
        responseBody: `{"error":"Incorrect API key provided: ${secret}"}`,
        isRetryable: false,
      });
    failing.answers.push(() => ({
      stream: simulateReadableStream<LanguageModelV3StreamPart>({
        chunks: [
          { type: "stream-start", warnings: [] },
          { type: "text-start", id: "t" },
          { type: "text-delta", id: "t", delta: "Sure, " },
          { type: "error", error: apiError() },
        ],
      }),
    }));
    const streamed = await events(await execute(key, { payload: "the user's secret question", stream: true }));
    const last = streamed.at(-1);
    expect(last?.type).toBe("error");
    expect(streamed.some((e) => e.type === "finish")).toBe(false);
    expect(last?.errorText).toBe("The model provider refused the request (HTTP 401): check its API key and access.");
    const runId = streamed[0]?.data?.run_id as string;
    const run = await storage.findRun(runId);
    expect(run).toMatchObject({ status: "error", error: last?.errorText });
    expect(JSON.stringify(await history(key, run?.conversationId as string))).not.toContain(secret);

    // Refused before any text: answered as JSON, a flow error with the same readable message.
    failing.answers.push(() => {
      throw apiError();
    });
    const document = await runJson(key, { payload: "again" });
    expect(document).toMatchObject({ status: "error", error: { code: "flow_error", message: expect.stringContaining("HTTP 401") } });
    expect(JSON.stringify(document)).not.toContain(secret);
    expect(JSON.stringify(document)).not.toContain("secret question");
  });

  it("a tool hands the conversation over to a human: the run is pending in livechat_waiting; another asks the user and pauses", async () => {
    const key = await channel("human");
    human.answers.push(() => calls("h1", "handover", { reason: "wants a person" }, "Let me find someone."));
    const handedOver = await runJson(key, { payload: "I want a person" });
    expect(handedOver).toMatchObject({ status: "pending", output: { metadata: { livechat_mode: "livechat_waiting" } } });
    expect(human.model.doStreamCalls).toHaveLength(1);
    const messages = await history(key, handedOver.conversation_id);
    expect(messages.map((m) => [m.role, m.content])).toEqual([
      ["user", "I want a person"],
      ["assistant", "Let me find someone."],
      ["tool", '{"handedOver":true}'],
      ["assistant", "A person will take it from here."],
    ]);
    // The handover's message is the live chat's step, not the tool's.
    expect(messages.map((m) => m.node_type)).toEqual([null, "llm", "tool", "livechat"]);
    expect((await storage.findRun(handedOver.run_id))?.executionOrder).toEqual(["llm", "handover", "livechat"]);

    human.answers.push(() => calls("q1", "ask", { question: "What is your order number?" }));
    const asked = await runJson(key, { payload: "Where is my parcel?" });
    expect(asked.status).toBe("pending");
    expect(asked.output?.messages).toEqual([{ role: "assistant", content: "What is your order number?" }]);
  });
});

describe("fromUIMessageStream", () => {
  it("turns a hand-made UI message stream into a flow: text streamed, tool calls and results in history, data parts in the result", async () => {
    const key = await channel("hand-made");
    const document = await runJson(key, { payload: "How long do refunds take?" });
    expect(document).toMatchObject({
      status: "success",
      output: { result: { steps: 2, data: [{ type: "data-citation", data: { doc: "refunds.md" } }] } },
    });
    expect((await storage.findRun(document.run_id))?.executionOrder).toEqual(["llm", "search", "llm"]);
    const messages = await history(key, document.conversation_id);
    expect(messages.map(({ role, content, tool_calls, tool_call_id }) => ({ role, content, tool_calls, tool_call_id }))).toEqual([
      { role: "user", content: "How long do refunds take?", tool_calls: null, tool_call_id: null },
      { role: "assistant", content: "", tool_calls: [{ id: "c1", name: "search", arguments: { q: "refunds" } }], tool_call_id: null },
      { role: "tool", content: '{"hits":2}', tool_calls: null, tool_call_id: "c1" },
      { role: "assistant", content: "Refunds take 5 days.", tool_calls: null, tool_call_id: null },
    ]);
  });
});
