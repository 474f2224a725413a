import { defineFlow, type Flow } from "./define.js";
import { handover, pause, setState, step, suggestions, text } from "./events.js";

/** Splits text into words that keep their trailing whitespace, so the pieces rejoin exactly. */
function words(value: string): string[] {
  return value.split(/(?<=\s)/);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Replies `Echo: <payload>` word by word; `result` counts the conversation's user messages.
 * A conversation opened without a message (webhook) is greeted, with a suggestion.
 */
export const echoFlow = defineFlow<{ turn: number }>({
  name: "echo",
  version: "1",
  async *start() {
    yield step("greet", "greeting");
    yield text("Hello! How can I help you?");
    yield suggestions(["Echo test"]);
    return null;
  },
  async *run(ctx) {
    yield step("echo", "echo");
    for (const word of words(`Echo: ${ctx.payload}`)) yield text(word);
    const turn = (ctx.state?.turn ?? 0) + 1;
    yield setState({ turn });
    return { echo: ctx.payload, turn };
  },
});

/** Says `Working on it`, then fails. */
export const failFlow = defineFlow({
  name: "fail",
  version: "1",
  async *run() {
    yield step("fail", "fail");
    yield text("Working on it");
    throw new Error("flow failed on purpose");
  },
});

/** Asks for a name and pauses; the next run greets with it. */
export const askFlow = defineFlow<{ asked: boolean }>({
  name: "ask",
  version: "1",
  async *run(ctx) {
    if (!ctx.state?.asked) {
      yield step("ask", "question");
      yield setState({ asked: true });
      yield pause("What is your name?");
      return { asked: true };
    }
    yield step("greet", "answer");
    yield text(`Nice to meet you, ${ctx.payload}!`);
    yield setState({ asked: false });
    return { name: ctx.payload };
  },
});

/** Tells the user an agent is coming and hands the conversation over to live chat. */
export const handoverFlow = defineFlow({
  name: "handover",
  version: "1",
  async *run() {
    yield step("handover", "livechat");
    yield handover("Connecting you to an agent");
    return null;
  },
});

/** Streams 50 words, 100 ms apart: for abort and back-pressure tests. */
export const slowFlow = defineFlow({
  name: "slow",
  version: "1",
  async *run(ctx) {
    yield step("slow", "slow");
    for (let i = 1; i <= 50; i++) {
      await sleep(100, ctx.signal);
      yield text(i === 50 ? `word${i}` : `word${i} `);
    }
    return { words: 50 };
  },
});

/** The built-in demo flows: `echo`, `fail`, `ask`, `handover`, `slow`. */
export const demoFlows: Flow[] = [echoFlow, failFlow, askFlow, handoverFlow, slowFlow] as Flow[];
