// The model the agent uses when no OPENAI_API_KEY is set: the AI SDK's MockLanguageModelV3,
// answering from a script with no network. It reads the prompt it is given as a real model
// would, and decides on its last message:
//   - a tool result (lookupOrder's): answer in text from it;
//   - the user asking for a person: say so and call `handover`;
//   - the user naming an order number (3 digits or more): call `lookupOrder` with it;
//   - thanks: you are welcome; anything else: a short canned answer.
// Its text streams a word at a time, so `"stream": true` shows it arriving.
import { randomUUID } from "node:crypto";
import { simulateReadableStream } from "ai";
import { MockLanguageModelV3 } from "ai/test";

const WORD_DELAY_MS = 15;

export function mockModel() {
  return new MockLanguageModelV3({
    provider: "mock",
    modelId: "support-script",
    doStream: async ({ prompt }) => {
      const last = prompt.at(-1);
      if (last?.role === "tool") {
        const result = last.content.find((part) => part.type === "tool-result");
        return reply(prompt, answerFrom(result));
      }
      const text = textOf(last);
      if (/\b(human|person|someone|agent|people)\b/i.test(text)) {
        return reply(prompt, "Let me find someone from the team for you.", { toolName: "handover", input: { reason: "The user asked for a person." } });
      }
      const orderId = text.match(/\b\d{3,}\b/)?.[0];
      if (orderId) return reply(prompt, `Let me look order ${orderId} up.`, { toolName: "lookupOrder", input: { orderId } });
      if (/\b(thanks|thank you)\b/i.test(text)) return reply(prompt, "You are welcome! Anything else about an order?");
      return reply(prompt, "I can tell you where an order is: give me its number (try 1041, 1042 or 1043). Or ask for a person.");
    },
  });
}

/** The text of a user message of the prompt (its text parts). */
function textOf(message) {
  if (message?.role !== "user") return "";
  return message.content
    .filter((part) => part.type === "text")
    .map((part) => part.text)
    .join(" ");
}

/** What to say once `lookupOrder` answered: its result, as `{ type: "json", value }`. */
function answerFrom(result) {
  const order = result?.output?.type === "json" ? result.output.value : null;
  if (!order || typeof order !== "object") return "I could not look that order up right now. Ask me for a person if it is urgent.";
  if (!order.found) return `I found no order ${order.orderId}. Check the number on your confirmation email, or ask me for a person.`;
  switch (order.status) {
    case "shipped":
      return `Order ${order.orderId} has shipped: it left on ${order.shippedOn} with ${order.carrier} (tracking ${order.tracking}) and should arrive by ${order.estimatedDelivery}.`;
    case "delivered":
      return `Order ${order.orderId} was delivered on ${order.deliveredOn}.`;
    default:
      return `Order ${order.orderId} is ${order.status}: it should ship by ${order.shipsBy}.`;
  }
}

/** One model call: `text` streamed a word at a time, then the tool call `call` if any. */
function reply(prompt, text, call) {
  const words = text.split(/(?<= )/);
  const chunks = [
    { type: "stream-start", warnings: [] },
    { type: "text-start", id: "text" },
    ...words.map((delta) => ({ type: "text-delta", id: "text", delta })),
    { type: "text-end", id: "text" },
    ...(call ? [{ type: "tool-call", toolCallId: `call_${randomUUID().slice(0, 8)}`, toolName: call.toolName, input: JSON.stringify(call.input) }] : []),
    {
      type: "finish",
      finishReason: call ? { unified: "tool-calls", raw: "tool_calls" } : { unified: "stop", raw: "stop" },
      usage: usage(JSON.stringify(prompt).length, text.length),
    },
  ];
  return { stream: simulateReadableStream({ chunks, chunkDelayInMs: WORD_DELAY_MS }) };
}

/** Tokens, estimated as a provider would count them (about 4 characters each). */
function usage(promptChars, textChars) {
  const input = Math.ceil(promptChars / 4);
  const output = Math.ceil(textChars / 4);
  return {
    inputTokens: { total: input, noCache: input, cacheRead: 0, cacheWrite: 0 },
    outputTokens: { total: output, text: output, reasoning: 0 },
  };
}
