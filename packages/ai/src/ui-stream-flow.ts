import { defineFlow, type Flow, type FlowContext, type FlowEvent, message, sources, step, type ToolCall, text } from "@channelkit/core";
import type { UIMessageChunk } from "ai";

/** What a UI message stream said besides its text and tools, returned by {@link flowEventsOf}. */
export interface UIStreamSummary {
  /** The stream's `finishReason`, when it sent one. */
  finishReason: string | null;
  /** Its `data-*` parts (transient ones aside), in order: the contract's stream has no place for them, the run's result has. */
  data: { type: string; id?: string; data: unknown }[];
  /** How many steps it made. */
  steps: number;
}

/** Names of the steps a stream's parts start. */
export interface StepNames {
  /** The step of each model call (`node_type` `llm`); default `llm`. */
  llm?: string;
}

type Chunk = UIMessageChunk;

/**
 * Turns an AI SDK UI message stream into flow events: each step (`start-step`) a step of
 * node type `llm`; text deltas as text; the tool calls of a step on the step's reply as
 * `tool_calls` (`{ id, name, arguments }`), then each tool's result as a step of node type
 * `tool` with a `role: "tool"` message (`tool_call_id`; JSON text of the output, or
 * `{"error": ...}`); URL sources as the reply's `sources`. An `error` part throws its text,
 * an `abort` part throws. Returns what the stream said besides (its data parts).
 */
export async function* flowEventsOf(chunks: AsyncIterable<Chunk>, names: StepNames = {}): AsyncGenerator<FlowEvent, UIStreamSummary, void> {
  const llm = names.llm ?? "llm";
  const summary: UIStreamSummary = { finishReason: null, data: [], steps: 0 };
  let inStep = false;
  let calls: ToolCall[] = [];
  let results: { toolCallId: string; toolName: string; content: string }[] = [];
  const toolNames = new Map<string, string>();

  function* startStep(): Generator<FlowEvent> {
    if (inStep) return;
    inStep = true;
    summary.steps += 1;
    yield step(llm, "llm");
  }
  // The step's reply carries its calls; the results follow it, each a step of its tool.
  function* endStep(): Generator<FlowEvent> {
    inStep = false;
    if (calls.length > 0) yield message("", { toolCalls: calls });
    for (const result of results) {
      yield step(result.toolName, "tool");
      yield message(result.content, { role: "tool", toolCallId: result.toolCallId });
    }
    calls = [];
    results = [];
  }
  const result = (toolCallId: string, content: string) => results.push({ toolCallId, toolName: toolNames.get(toolCallId) ?? "tool", content });

  for await (const chunk of chunks) {
    switch (chunk.type) {
      case "start-step":
        yield* endStep();
        yield* startStep();
        break;
      case "finish-step":
        yield* endStep();
        break;
      case "text-delta":
        yield* startStep();
        yield text(chunk.delta);
        break;
      case "tool-input-available":
      case "tool-input-error":
        yield* startStep();
        toolNames.set(chunk.toolCallId, chunk.toolName);
        calls.push({ id: chunk.toolCallId, name: chunk.toolName, arguments: chunk.input ?? null });
        if (chunk.type === "tool-input-error") result(chunk.toolCallId, JSON.stringify({ error: chunk.errorText }));
        break;
      case "tool-output-available":
        if (!chunk.preliminary) result(chunk.toolCallId, typeof chunk.output === "string" ? chunk.output : JSON.stringify(chunk.output ?? null));
        break;
      case "tool-output-error":
        result(chunk.toolCallId, JSON.stringify({ error: chunk.errorText }));
        break;
      case "tool-output-denied":
        result(chunk.toolCallId, JSON.stringify({ denied: true }));
        break;
      case "source-url":
        yield sources([{ url: chunk.url, ...(chunk.title === undefined ? {} : { title: chunk.title }) }]);
        break;
      case "finish":
        if (chunk.finishReason !== undefined) summary.finishReason = chunk.finishReason;
        break;
      case "error":
        throw new Error(chunk.errorText);
      case "abort":
        throw new Error(chunk.reason ? `The agent stopped: ${chunk.reason}` : "The agent stopped before it answered.");
      default:
        if (chunk.type.startsWith("data-") && !(chunk as { transient?: boolean }).transient) {
          const part = chunk as { type: string; id?: string; data: unknown };
          summary.data.push({ type: part.type, ...(part.id === undefined ? {} : { id: part.id }), data: part.data });
        }
    }
  }
  yield* endStep();
  return summary;
}

/** What {@link fromUIMessageStream} takes. */
export interface UIMessageStreamFlowOptions<State = unknown> extends StepNames {
  /** The name channels bind to. */
  name: string;
  id?: string;
  version?: string | null;
  /**
   * Makes the run's UI message stream: a `ReadableStream` (what `toUIMessageStream()`,
   * `createUIMessageStream()` and the adapters of other agent frameworks return) or any
   * async iterable of its chunks. Stop when `ctx.signal` aborts.
   */
  stream(ctx: FlowContext<State>): ReadableStream<Chunk> | AsyncIterable<Chunk> | Promise<ReadableStream<Chunk> | AsyncIterable<Chunk>>;
}

/**
 * Any agent that speaks the AI SDK's UI message stream, as a flow: a hand-made
 * `createUIMessageStream`, an AI SDK `streamText(...).toUIMessageStream()`, or another
 * framework's adapter (Mastra, LangChain's AI SDK adapter). Text is streamed, tool calls and
 * results land in the history, data parts in the run's `result` (`{ finishReason, steps, data }`).
 *
 * @example
 * const agent = fromUIMessageStream({
 *   name: "agent",
 *   stream: (ctx) => streamText({ model, prompt: ctx.payload, abortSignal: ctx.signal }).toUIMessageStream(),
 * });
 */
export function fromUIMessageStream<State = unknown>(options: UIMessageStreamFlowOptions<State>): Flow<State> {
  return defineFlow<State>({
    name: options.name,
    ...(options.id === undefined ? {} : { id: options.id }),
    ...(options.version === undefined ? {} : { version: options.version }),
    async *run(ctx) {
      const stream = await options.stream(ctx);
      const summary = yield* flowEventsOf(iterate(stream), options);
      return { finishReason: summary.finishReason, steps: summary.steps, ...(summary.data.length > 0 ? { data: summary.data } : {}) };
    },
  });
}

/** A stream's chunks as an async iterable, releasing the stream when the flow stops early. */
export async function* iterate<T>(source: ReadableStream<T> | AsyncIterable<T>): AsyncGenerator<T, void, void> {
  if (Symbol.asyncIterator in source) {
    yield* source as AsyncIterable<T>;
    return;
  }
  const reader = (source as ReadableStream<T>).getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    void reader.cancel().catch(() => undefined);
  }
}
