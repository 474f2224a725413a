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

/**
 * How the current reply is presented on channels that show more than text (the webhook
 * channel's `BOT_MESSAGE`): it applies to the text being written, else to the last reply,
 * else to the next one. Each field given replaces the one set before.
 */
export interface ReplyOptionsEvent {
  type: "reply-options";
  /** Quick replies offered to the user. */
  suggestions?: string[];
  /** Where the answer comes from (documents, links): any JSON values. */
  sources?: unknown[];
  /** What the reply expects back, e.g. `text`, `suggestion`, `textOrSuggestion`. */
  expectedResponseType?: string;
}
/** Sets variables of the conversation's context, merged into those set before in the run. */
export interface VariablesEvent {
  type: "variables";
  variables: Record<string, unknown>;
}

/** What a flow yields while it runs. */
export type FlowEvent = StepEvent | TextDeltaEvent | MessageEvent | PauseEvent | HandoverEvent | StateEvent | ReplyOptionsEvent | VariablesEvent;

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

/**
 * Offers `list` as quick replies with the current reply (the webhook channel's
 * `suggestions`); the expected response type then defaults to `textOrSuggestion`.
 */
export function suggestions(list: string[]): ReplyOptionsEvent {
  return { type: "reply-options", suggestions: list };
}

/** Cites where the current reply comes from (the webhook channel's `sources`). */
export function sources(list: unknown[]): ReplyOptionsEvent {
  return { type: "reply-options", sources: list };
}

/** Says what the current reply expects back (the webhook channel's `expectedResponseType`, e.g. `suggestion`). */
export function expectResponse(type: string): ReplyOptionsEvent {
  return { type: "reply-options", expectedResponseType: type };
}

/** Sets variables of the conversation's context (the webhook channel's `context.variables`). */
export function setVariables(variables: Record<string, unknown>): VariablesEvent {
  return { type: "variables", variables };
}

function pickDefined(options: { toolCalls?: ToolCall[]; toolCallId?: string }) {
  const out: { toolCalls?: ToolCall[]; toolCallId?: string } = {};
  if (options.toolCalls !== undefined) out.toolCalls = options.toolCalls;
  if (options.toolCallId !== undefined) out.toolCallId = options.toolCallId;
  return out;
}
