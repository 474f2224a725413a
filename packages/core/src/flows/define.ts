import type { ChannelRecord, Environment, MessageRole, ToolCall } from "../storage/types.js";
import type { FlowEvent } from "./events.js";

/** A message of the conversation's history, as a flow sees it. */
export interface FlowHistoryMessage {
  role: MessageRole;
  content: string;
  toolCalls: ToolCall[] | null;
  toolCallId: string | null;
}

/**
 * Why a run happens: a user's `message`, or the `start` of a conversation opened without
 * one (the webhook channel's `startConversation`), which runs the flow's `start`.
 */
export type FlowTrigger = "message" | "start";

/** What a flow receives for one run. It never sees HTTP or storage. */
export interface FlowContext<State = unknown> {
  /** The user's input of this run (`""` when `trigger` is `start`). */
  payload: string;
  trigger: FlowTrigger;
  /** The language the conversation was started in (`xx_XX`, webhook channels), or null. */
  language: string | null;
  /** Free contextual data sent with the request (`{}` when none). */
  metadata: Record<string, unknown>;
  runId: string;
  conversationId: string;
  /** True when this run started the conversation. */
  isNewConversation: boolean;
  channel: { id: string; environment: Environment; type: ChannelRecord["type"] };
  /** The state the flow persisted for this conversation, or `undefined` on its first run. */
  state: State | undefined;
  /** The conversation's most recent messages before this run, oldest first (loaded on demand). */
  history(limit?: number): Promise<FlowHistoryMessage[]>;
  /** Aborted when the client goes away or the service closes; stop work promptly. */
  signal: AbortSignal;
}

/** A conversational flow: an async generator of {@link FlowEvent}s that returns a result. */
export interface Flow<State = unknown> {
  /** Unique name a channel binds to. */
  name: string;
  /** Stable UUID of the flow; derived from the name when not given. */
  id?: string;
  version?: string | null;
  /** Runs for each user message. */
  run(ctx: FlowContext<State>): AsyncGenerator<FlowEvent, unknown, void> | AsyncIterable<FlowEvent>;
  /**
   * Runs when a conversation is opened without a user message (the webhook channel's
   * `startConversation`), typically to greet; without it such a start produces no reply.
   */
  start?(ctx: FlowContext<State>): AsyncGenerator<FlowEvent, unknown, void> | AsyncIterable<FlowEvent>;
}

/**
 * Declares a flow. `run` yields steps, text deltas, messages, a pause or a handover, and
 * returns the run's `result` (any JSON value).
 *
 * @example
 * const greet = defineFlow({
 *   name: "greet",
 *   async *run(ctx) {
 *     yield step("greet");
 *     yield text(`Hello, ${ctx.payload}!`);
 *     return { greeted: ctx.payload };
 *   },
 * });
 */
export function defineFlow<State = unknown>(flow: Flow<State>): Flow<State> {
  if (!flow.name || typeof flow.name !== "string") throw new TypeError("defineFlow: `name` is required");
  if (typeof flow.run !== "function") throw new TypeError(`defineFlow(${flow.name}): \`run\` must be a function`);
  if (flow.start !== undefined && typeof flow.start !== "function") throw new TypeError(`defineFlow(${flow.name}): \`start\` must be a function`);
  return flow;
}
