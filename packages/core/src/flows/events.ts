import type { ToolCall } from "../storage/types.js";

/** Starts a step: the node the flow executes next. Messages after it belong to it. */
export interface StepEvent {
  type: "step";
  name: string;
  nodeType: string;
}
/** An incremental fragment of the current assistant message. */
export interface TextDeltaEvent {
  type: "text-delta";
  delta: string;
}
/** A whole message: an assistant reply, or a tool result. */
export interface MessageEvent {
  type: "message";
  role: "assistant" | "tool";
  content: string;
  toolCalls?: ToolCall[];
  toolCallId?: string;
}
/** Ends the run as `pending`, asking the user a question; the next execute resumes. */
export interface PauseEvent {
  type: "pause";
  question: string;
}
/** Ends the run as `pending` and hands the conversation over to live chat. */
export interface HandoverEvent {
  type: "handover";
  message?: string;
}
/** Replaces the flow's persisted per-conversation state. */
export interface StateEvent {
  type: "state";
  state: unknown;
}

/** What a flow yields while it runs. */
export type FlowEvent = StepEvent | TextDeltaEvent | MessageEvent | PauseEvent | HandoverEvent | StateEvent;

/** Starts a step named `name` of node type `nodeType` (defaults to the name). */
export function step(name: string, nodeType: string = name): StepEvent {
  return { type: "step", name, nodeType };
}

/** A fragment of the assistant's reply, streamed as it comes. */
export function text(delta: string): TextDeltaEvent {
  return { type: "text-delta", delta };
}

/** A whole message; use `role: "tool"` with `toolCallId` for a tool result. */
export function message(content: string, options: { role?: "assistant" | "tool"; toolCalls?: ToolCall[]; toolCallId?: string } = {}): MessageEvent {
  return { type: "message", role: options.role ?? "assistant", content, ...pickDefined(options) };
}

/** Asks `question` and pauses the run; the conversation's next execute resumes the flow. */
export function pause(question: string): PauseEvent {
  return { type: "pause", question };
}

/** Hands the conversation over to a human agent, optionally telling the user so. */
export function handover(message?: string): HandoverEvent {
  return message === undefined ? { type: "handover" } : { type: "handover", message };
}

/** Persists `state` for this conversation; the flow reads it back as `ctx.state` next run. */
export function setState(state: unknown): StateEvent {
  return { type: "state", state };
}

function pickDefined(options: { toolCalls?: ToolCall[]; toolCallId?: string }) {
  const out: { toolCalls?: ToolCall[]; toolCallId?: string } = {};
  if (options.toolCalls !== undefined) out.toolCalls = options.toolCalls;
  if (options.toolCallId !== undefined) out.toolCallId = options.toolCallId;
  return out;
}
