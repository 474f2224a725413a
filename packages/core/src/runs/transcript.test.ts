import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { estimateTokens } from "../conversations/tokens.js";
import { expectResponse, handover, message, pause, setState, setVariables, sources, step, suggestions, text } from "../flows/events.js";
import { type RunEnd, type TextPart, Transcript } from "./transcript.js";

const RUN_ID = "run-1";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function transcript(live = true): Transcript {
  return new Transcript({ runId: RUN_ID, estimateTokens, live });
}

const END: RunEnd = {
  status: "success",
  result: { ok: true },
  error: null,
  startedAt: "2025-01-01T00:00:00.000Z",
  completedAt: "2025-01-01T00:00:01.500Z",
  durationMs: 1500,
};

/** The parts as `[type, delta?]`, with ids checked apart. */
const shape = (parts: readonly TextPart[]) => parts.map((part) => (part.type === "text-delta" ? [part.type, part.delta] : [part.type]));

describe("Transcript: live text", () => {
  it("keeps a text open across deltas, under one id, and closes it at the end", () => {
    const t = transcript();
    const first = t.apply(text("Hello"));
    const second = t.apply(text(", "));
    const third = t.apply(text("world"));
    expect(shape(first)).toEqual([["text-start"], ["text-delta", "Hello"]]);
    expect(shape(second)).toEqual([["text-delta", ", "]]);
    expect(shape(third)).toEqual([["text-delta", "world"]]);
    // Nothing is stored while the text is open.
    expect(t.produced).toEqual([]);
    const end = t.end();
    expect(shape(end)).toEqual([["text-end"]]);
    const ids = new Set([...first, ...second, ...third, ...end].map((part) => part.id));
    expect(ids.size).toBe(1);
    expect([...ids][0]).toMatch(UUID);
    expect(t.produced.map((m) => [m.role, m.content])).toEqual([["assistant", "Hello, world"]]);
    // Ending again sends nothing and stores nothing more.
    expect(t.end()).toEqual([]);
    expect(t.produced).toHaveLength(1);
  });

  it("ignores empty deltas: they neither open a text nor send a part", () => {
    const t = transcript();
    expect(t.apply(text(""))).toEqual([]);
    expect(t.end()).toEqual([]);
    expect(t.produced).toEqual([]);

    const open = transcript();
    open.apply(text("a"));
    expect(open.apply(text(""))).toEqual([]);
    expect(shape(open.apply(text("b")))).toEqual([["text-delta", "b"]]);
    open.end();
    expect(open.produced.map((m) => m.content)).toEqual(["ab"]);
  });

  it("closes the open text at a step, and opens a new one (a new id) after it", () => {
    const t = transcript();
    const before = t.apply(text("one"));
    expect(shape(t.apply(step("next", "llm")))).toEqual([["text-end"]]);
    const after = t.apply(text("two"));
    expect(shape(after)).toEqual([["text-start"], ["text-delta", "two"]]);
    expect(after[0]?.id).not.toBe(before[0]?.id);
    t.end();
    expect(t.produced.map((m) => m.content)).toEqual(["one", "two"]);
  });

  it("sends nothing at a step when no text is open", () => {
    const t = transcript();
    expect(t.apply(step("a"))).toEqual([]);
    expect(t.apply(step("b"))).toEqual([]);
    expect(t.produced).toEqual([]);
  });

  it("closes the open text at an assistant message, which is a whole text of its own", () => {
    const t = transcript();
    const open = t.apply(text("partial"));
    const parts = t.apply(message("whole"));
    expect(shape(parts)).toEqual([["text-end"], ["text-start"], ["text-delta", "whole"], ["text-end"]]);
    expect(parts[0]?.id).toBe(open[0]?.id);
    expect(parts[1]?.id).not.toBe(open[0]?.id);
    expect(parts[1]?.id).toBe(parts[3]?.id);
    expect(t.end()).toEqual([]);
    expect(t.produced.map((m) => [m.role, m.content])).toEqual([
      ["assistant", "partial"],
      ["assistant", "whole"],
    ]);
  });

  it("sends an empty whole text as a start and an end, with no delta, and stores it", () => {
    const t = transcript();
    expect(shape(t.apply(message("")))).toEqual([["text-start"], ["text-end"]]);
    expect(t.produced.map((m) => m.content)).toEqual([""]);
  });

  it("closes the open text at a tool message, which sends no part of its own", () => {
    const t = transcript();
    t.apply(text("calling"));
    expect(shape(t.apply(message('{"x":1}', { role: "tool", toolCallId: "call_1" })))).toEqual([["text-end"]]);
    expect(t.apply(message("again", { role: "tool" }))).toEqual([]);
    expect(t.produced.map((m) => [m.role, m.content])).toEqual([
      ["assistant", "calling"],
      ["tool", '{"x":1}'],
      ["tool", "again"],
    ]);
  });

  it("closes the open text at a pause, and sends the question as a whole text", () => {
    const t = transcript();
    t.apply(text("Let me ask"));
    expect(shape(t.apply(pause("Your name?")))).toEqual([["text-end"], ["text-start"], ["text-delta", "Your name?"], ["text-end"]]);
    expect(t.produced.map((m) => m.content)).toEqual(["Let me ask", "Your name?"]);
  });

  it("closes the open text at a handover; its message is a whole text, and without one it sends nothing", () => {
    const t = transcript();
    t.apply(text("One moment"));
    expect(shape(t.apply(handover("Connecting you")))).toEqual([["text-end"], ["text-start"], ["text-delta", "Connecting you"], ["text-end"]]);
    expect(t.produced.map((m) => m.content)).toEqual(["One moment", "Connecting you"]);

    const silent = transcript();
    expect(silent.apply(handover())).toEqual([]);
    expect(silent.produced).toEqual([]);
    // A handover without a message leaves an open text open.
    const open = transcript();
    open.apply(text("still open"));
    expect(open.apply(handover())).toEqual([]);
    expect(shape(open.end())).toEqual([["text-end"]]);
    expect(open.produced.map((m) => m.content)).toEqual(["still open"]);
  });

  it("sends no parts at all when not live, and stores the same messages", () => {
    const events = [text("a"), text("b"), step("s", "llm"), text("c"), message("whole"), message("r", { role: "tool", toolCallId: "c1" }), pause("q")];
    const live = transcript(true);
    const quiet = transcript(false);
    const liveParts = events.flatMap((event) => [...live.apply(event)]);
    expect(liveParts.length).toBeGreaterThan(0);
    for (const event of events) expect(quiet.apply(event)).toEqual([]);
    expect(quiet.end()).toEqual([]);
    live.end();
    const stored = (t: Transcript) => t.produced.map((m) => [m.role, m.content, m.nodeType, m.toolCallId]);
    expect(stored(quiet)).toEqual(stored(live));
    expect(stored(quiet)).toEqual([
      ["assistant", "ab", null, null],
      ["assistant", "c", "llm", null],
      ["assistant", "whole", "llm", null],
      ["tool", "r", "llm", "c1"],
      ["assistant", "q", "llm", null],
    ]);
  });
});

describe("Transcript: messages", () => {
  it("gives each step a new step id and its node type, for the messages after it, and records the step order", () => {
    const t = transcript();
    t.apply(text("before any step"));
    t.apply(step("plan", "llm"));
    t.apply(text("planned"));
    t.apply(step("lookup", "tool"));
    t.apply(message("found", { role: "tool", toolCallId: "call_1" }));
    t.apply(step("plan", "llm"));
    t.apply(message("again"));
    t.end();
    const [first, planned, found, again] = t.produced;
    expect(first).toMatchObject({ stepId: null, nodeType: null });
    expect(planned).toMatchObject({ nodeType: "llm" });
    expect(found).toMatchObject({ nodeType: "tool" });
    expect(again).toMatchObject({ nodeType: "llm" });
    for (const produced of [planned, found, again]) expect(produced?.stepId).toMatch(UUID);
    // The same step name twice is two steps: two ids.
    expect(new Set([planned?.stepId, found?.stepId, again?.stepId]).size).toBe(3);
    expect(t.executionOrder).toEqual(["plan", "lookup", "plan"]);
  });

  it("closes the text of a step with that step's id, even when the next step closes it", () => {
    const t = transcript();
    t.apply(step("one", "a"));
    t.apply(text("text of one"));
    t.apply(step("two", "b"));
    t.end();
    expect(t.produced[0]).toMatchObject({ content: "text of one", nodeType: "a" });
  });

  it("stores the fields of each message: run, origin, tokens, tool calls and tool call id", () => {
    const t = transcript();
    const calls = [{ id: "call_1", name: "lookup", arguments: { q: "answer" } }];
    t.apply(step("plan", "llm"));
    t.apply(message("", { toolCalls: calls }));
    t.apply(message('{"answer":42}', { role: "tool", toolCallId: "call_1" }));
    t.apply(message("carried", { role: "tool", toolCalls: calls }));
    t.apply(text("The answer is 42."));
    t.end();
    const [call, tool, carried, reply] = t.produced;
    for (const produced of t.produced) {
      expect(produced).toMatchObject({ origin: "agent", runId: RUN_ID, livechatMessageId: null, sender: null });
      expect(Date.parse(produced.timestamp)).not.toBeNaN();
      expect(produced.tokenCount).toBe(estimateTokens(produced.content));
    }
    expect(call).toMatchObject({ role: "assistant", content: "", toolCalls: calls, toolCallId: null });
    expect(tool).toMatchObject({ role: "tool", toolCalls: null, toolCallId: "call_1" });
    expect(carried).toMatchObject({ role: "tool", toolCalls: calls, toolCallId: null });
    expect(reply).toMatchObject({ role: "assistant", content: "The answer is 42.", toolCalls: null, toolCallId: null, tokenCount: 5 });
  });

  it("puts tool calls without text on the reply being written, else on a message of their own, sending no empty text", () => {
    const t = transcript(true);
    const first = [{ id: "call_1", name: "lookup", arguments: { order: 7 } }];
    const second = [{ id: "call_2", name: "handover", arguments: {} }];
    t.apply(step("llm"));
    const spoken = [...t.apply(text("Let me look.")), ...t.apply(message("", { toolCalls: first }))];
    expect(spoken.map((part) => part.type)).toEqual(["text-start", "text-delta", "text-end"]);
    expect(t.apply(message("", { toolCalls: second }))).toEqual([]);
    t.end();
    expect(t.produced.map(({ content, toolCalls }) => ({ content, toolCalls }))).toEqual([
      { content: "Let me look.", toolCalls: first },
      { content: "", toolCalls: second },
    ]);
  });

  it("makes the run's user message with the given time and no step", () => {
    const t = transcript();
    t.apply(step("s", "llm"));
    const user = t.message("user", "What is the answer?", "2025-01-01T00:00:00.000Z", null, null);
    expect(user).toEqual({
      origin: "agent",
      role: "user",
      content: "What is the answer?",
      timestamp: "2025-01-01T00:00:00.000Z",
      tokenCount: 5,
      runId: RUN_ID,
      stepId: null,
      nodeType: null,
      toolCalls: null,
      toolCallId: null,
      livechatMessageId: null,
      sender: null,
      metadata: null,
    });
    // A message made by hand is not among the produced ones.
    expect(t.produced).toEqual([]);
  });

  it("keeps the last state set, including undefined, and sends nothing for it", () => {
    const t = transcript();
    expect(t.flowState).toBeNull();
    expect(t.apply(setState({ count: 1 }))).toEqual([]);
    expect(t.flowState).toEqual({ value: { count: 1 } });
    t.apply(setState({ count: 2 }));
    expect(t.flowState).toEqual({ value: { count: 2 } });
    t.apply(setState(undefined));
    expect(t.flowState).toEqual({ value: undefined });
    expect("value" in (t.flowState ?? {})).toBe(true);
    // Setting state leaves an open text open.
    t.apply(text("x"));
    expect(t.apply(setState(1))).toEqual([]);
    expect(shape(t.end())).toEqual([["text-end"]]);
  });
});

describe("Transcript: outcome", () => {
  it("is the run's end with what it produced; success without a pause stays success", () => {
    const t = transcript();
    t.apply(step("s", "llm"));
    t.apply(text("hi"));
    t.end();
    expect(t.outcome(RUN_ID, "conv-1", END)).toEqual({
      runId: RUN_ID,
      conversationId: "conv-1",
      status: "success",
      result: { ok: true },
      error: null,
      produced: t.produced,
      executionOrder: ["s"],
      startedAt: END.startedAt,
      completedAt: END.completedAt,
      durationMs: 1500,
      livechatMode: null,
      replyOptions: new Map(),
      variables: {},
    });
  });

  it("attaches reply options to the text being written, else the last reply, else the next one", () => {
    const t = transcript();
    t.apply(suggestions(["early"]));
    t.apply(step("a", "llm"));
    t.apply(text("first"));
    t.apply(sources([{ url: "https://docs.example" }]));
    t.apply(message("second"));
    t.apply(suggestions(["yes", "no"]));
    t.apply(expectResponse("suggestion"));
    t.apply(message("tool output", { role: "tool", toolCallId: "call-1" }));
    t.apply(suggestions(["after the tool"]));
    t.apply(pause("third"));
    t.end();
    expect(t.produced.map((m) => m.content)).toEqual(["first", "second", "tool output", "third"]);
    expect([...t.outcome(RUN_ID, "c", END).replyOptions]).toEqual([
      [0, { suggestions: ["early"], sources: [{ url: "https://docs.example" }] }],
      [1, { suggestions: ["yes", "no"], expectedResponseType: "suggestion" }],
      [3, { suggestions: ["after the tool"] }],
    ]);
  });

  it("merges the variables the flow sets", () => {
    const t = transcript();
    t.apply(setVariables({ name: "Ada", plan: "free" }));
    t.apply(setVariables({ plan: "pro" }));
    expect(t.outcome(RUN_ID, "c", END).variables).toEqual({ name: "Ada", plan: "pro" });
  });

  it("is pending after a pause, with no live-chat mode", () => {
    const t = transcript();
    t.apply(pause("Your name?"));
    expect(t.outcome(RUN_ID, "c", END)).toMatchObject({ status: "pending", result: { ok: true }, livechatMode: null });
  });

  it("is pending after a handover, with or without a message, and puts the conversation in livechat_waiting", () => {
    for (const event of [handover("Connecting"), handover()]) {
      const t = transcript();
      t.apply(event);
      expect(t.outcome(RUN_ID, "c", END)).toMatchObject({ status: "pending", livechatMode: "livechat_waiting" });
    }
  });

  it("stays error or cancelled after a pause or a handover, with no live-chat mode; an error has no result", () => {
    const t = transcript();
    t.apply(handover("Connecting"));
    expect(t.outcome(RUN_ID, "c", { ...END, status: "error", error: "boom" })).toMatchObject({
      status: "error",
      error: "boom",
      result: null,
      livechatMode: null,
    });
    expect(t.outcome(RUN_ID, "c", { ...END, status: "cancelled", result: null })).toMatchObject({ status: "cancelled", livechatMode: null });
  });

  it("keeps the text of a cancelled run and closes it: a resumed stream's followers read its end", () => {
    const t = transcript();
    t.apply(step("talk", "llm"));
    t.apply(text("partial "));
    t.apply(text("answer"));
    expect(t.end().map((part) => part.type)).toEqual(["text-end"]);
    expect(t.produced.map((m) => [m.role, m.content, m.nodeType])).toEqual([["assistant", "partial answer", "llm"]]);
    expect(t.outcome(RUN_ID, "c", { ...END, status: "cancelled", result: null }).produced).toHaveLength(1);
  });
});

describe("Transcript: memory per open stream (docs/benchmarks.md)", () => {
  it("a run writing its reply keeps flat ids and no map of reply options it has none of", () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const count = 5000;
    const kept: Transcript[] = new Array(count);
    const delta = text("word ");
    gc();
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < count; i++) {
      const t = transcript();
      t.apply(step("slow", "slow"));
      t.apply(delta);
      kept[i] = t;
    }
    gc();
    gc();
    const perRun = (process.memoryUsage().heapUsed - before) / count;
    // About 650 bytes: 180 more with an empty Map of reply options, 900 more again with the
    // step and text ids as randomUUID() builds them.
    expect(perRun).toBeLessThan(740);
    expect(kept.length).toBe(count);
  });
});
