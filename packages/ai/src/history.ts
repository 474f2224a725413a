import type { FlowHistoryMessage } from "@channelkit/core";
import type { ModelMessage } from "ai";

/** The estimate of a message's tokens when none is given: ceil(characters / 4), as the service's default. */
const estimate = (text: string) => Math.ceil(text.length / 4);

/**
 * The conversation's history as the AI SDK's model messages: user and assistant text, the
 * assistant's tool calls, and the tools' results (`role: "tool"`), keeping the most recent
 * messages whose estimated tokens fit `tokenBudget`. A tool call and its result are kept
 * together or not at all, as providers require; messages of the
 * live chat's `system` side are left out (they are notes for the user, not the model's turns).
 */
export function toModelMessages(history: readonly FlowHistoryMessage[], tokenBudget = Number.POSITIVE_INFINITY): ModelMessage[] {
  let used = 0;
  let first = history.length;
  while (first > 0) {
    const message = history[first - 1] as FlowHistoryMessage;
    const cost = estimate(message.content) + (message.toolCalls ? estimate(JSON.stringify(message.toolCalls)) : 0);
    if (used + cost > tokenBudget) break;
    used += cost;
    first -= 1;
  }
  const kept = history.slice(first);
  // A call is sent only with its answer (a run stopped between the two stored the call alone):
  // providers refuse a tool call that no tool result follows.
  const answered = new Set(kept.flatMap((message) => (message.role === "tool" && message.toolCallId !== null ? [message.toolCallId] : [])));
  const callNames = new Map<string, string>();
  const messages: ModelMessage[] = [];
  for (const message of kept) {
    switch (message.role) {
      case "user":
        messages.push({ role: "user", content: message.content });
        break;
      case "assistant": {
        const calls = (message.toolCalls ?? []).filter((call) => answered.has(call.id));
        if (calls.length === 0) {
          if (message.content !== "") messages.push({ role: "assistant", content: message.content });
          break;
        }
        for (const call of calls) callNames.set(call.id, call.name);
        messages.push({
          role: "assistant",
          content: [
            ...(message.content === "" ? [] : [{ type: "text" as const, text: message.content }]),
            ...calls.map((call) => ({ type: "tool-call" as const, toolCallId: call.id, toolName: call.name, input: call.arguments })),
          ],
        });
        break;
      }
      case "tool": {
        const toolName = message.toolCallId === null ? undefined : callNames.get(message.toolCallId);
        if (toolName === undefined || message.toolCallId === null) break;
        messages.push({ role: "tool", content: [{ type: "tool-result", toolCallId: message.toolCallId, toolName, output: toolOutput(message.content) }] });
        break;
      }
      case "system":
        break;
    }
  }
  return messages;
}

/** A stored tool result (JSON text when the tool answered a value) as the model's tool output. */
function toolOutput(content: string): { type: "json"; value: never } | { type: "text"; value: string } {
  try {
    return { type: "json", value: JSON.parse(content) as never };
  } catch {
    return { type: "text", value: content };
  }
}
