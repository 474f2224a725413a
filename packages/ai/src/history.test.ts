import type { FlowHistoryMessage } from "@channelkit/core";
import { describe, expect, it } from "vitest";
import { toModelMessages } from "./history.js";

const say = (role: FlowHistoryMessage["role"], content: string, extra: Partial<FlowHistoryMessage> = {}): FlowHistoryMessage => ({
  role,
  content,
  toolCalls: null,
  toolCallId: null,
  ...extra,
});

describe("toModelMessages", () => {
  const history = [
    say("user", "Where is order 7?"),
    say("assistant", "Let me check.", { toolCalls: [{ id: "c1", name: "lookupOrder", arguments: { id: 7 } }] }),
    say("tool", '{"status":"shipped"}', { toolCallId: "c1" }),
    say("assistant", "It shipped."),
    say("system", "An agent joined."),
    say("user", "Thanks"),
  ];

  it("gives each role its model message, tool calls and results paired, the live chat's system notes left out", () => {
    expect(toModelMessages(history)).toEqual([
      { role: "user", content: "Where is order 7?" },
      {
        role: "assistant",
        content: [
          { type: "text", text: "Let me check." },
          { type: "tool-call", toolCallId: "c1", toolName: "lookupOrder", input: { id: 7 } },
        ],
      },
      { role: "tool", content: [{ type: "tool-result", toolCallId: "c1", toolName: "lookupOrder", output: { type: "json", value: { status: "shipped" } } }] },
      { role: "assistant", content: "It shipped." },
      { role: "user", content: "Thanks" },
    ]);
  });

  it("keeps the most recent messages that fit the token budget, never a result without its call", () => {
    // "It shipped." (3) + "Thanks" (2) + the system note (4) fit in 9; the tool result would not.
    expect(toModelMessages(history, 9)).toEqual([
      { role: "assistant", content: "It shipped." },
      { role: "user", content: "Thanks" },
    ]);
    // With the result but not its call, the result is dropped too.
    const withResult = toModelMessages(history, 15);
    expect(withResult.map((m) => m.role)).toEqual(["assistant", "user"]);
    expect(toModelMessages(history, 0)).toEqual([]);
  });

  it("drops a call that no result answers (a run stopped between them), keeping its text; a text result stays text", () => {
    const stopped = [
      say("assistant", "Checking.", { toolCalls: [{ id: "c9", name: "lookupOrder", arguments: {} }] }),
      say("assistant", "", { toolCalls: [{ id: "c10", name: "search", arguments: { q: "x" } }] }),
      say("tool", "plain words", { toolCallId: "c10" }),
    ];
    expect(toModelMessages(stopped)).toEqual([
      { role: "assistant", content: "Checking." },
      { role: "assistant", content: [{ type: "tool-call", toolCallId: "c10", toolName: "search", input: { q: "x" } }] },
      { role: "tool", content: [{ type: "tool-result", toolCallId: "c10", toolName: "search", output: { type: "text", value: "plain words" } }] },
    ]);
  });
});
