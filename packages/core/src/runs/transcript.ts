import type { TokenEstimator } from "../conversations/tokens.js";
import type { FlowEvent } from "../flows/events.js";
import type { ConversationMode, MessageRole, NewMessage, RunStatus, ToolCall } from "../storage/types.js";
import type { ReplyOptions, RunOutcome } from "./outcome.js";
import { newUuid } from "./run-id.js";
import { isoNow } from "./timestamp.js";

/** A part of the live reply, in the UI message stream's own shapes. */
export type TextPart = { type: "text-start"; id: string } | { type: "text-delta"; id: string; delta: string } | { type: "text-end"; id: string };

/** Who a transcript belongs to, and whether its parts are wanted. */
interface TranscriptOptions {
  runId: string;
  estimateTokens: TokenEstimator;
  /**
   * Whether the caller streams the live text. When false (a JSON answer) no parts are made:
   * they would only be discarded.
   */
  live: boolean;
}

/** How a run ended, as the driver saw it. */
export interface RunEnd {
  status: RunStatus;
  result: unknown;
  error: string | null;
  startedAt: string;
  completedAt: string;
  durationMs: number;
}

const NO_PARTS: readonly TextPart[] = Object.freeze([]);

/** A message a run stores (`origin: "agent"`), in the step `stepId` of node type `nodeType`. */
export function agentMessage(
  runId: string,
  role: MessageRole,
  content: string,
  timestamp: string,
  tokenCount: number,
  stepId: string | null,
  nodeType: string | null,
): NewMessage {
  return {
    origin: "agent",
    role,
    content,
    timestamp,
    tokenCount,
    runId,
    stepId,
    nodeType,
    toolCalls: null,
    toolCallId: null,
    livechatMessageId: null,
    sender: null,
    metadata: null,
  };
}

/**
 * The rules that turn a flow's events into the reply's parts and the messages stored: a
 * text stays open across deltas and closes at the next step, message, pause or the end;
 * each step starts a new step id and node type for the messages after it; a pause or a
 * handover makes the run `pending`. Pure: no clock but message timestamps, no storage, no
 * I/O, so every rule is tested on its own.
 */
export class Transcript {
  /** Messages the run produced (not the user's), in order. */
  readonly produced: NewMessage[] = [];
  /**
   * Step names in the order they started. Replaced by a one-element array at the first step:
   * an empty array grows to 17 slots at its first push, 150 bytes kept for a run that most
   * often has one step (docs/benchmarks.md, "Memory per open stream").
   */
  executionOrder: string[] = [];
  /** The flow's new state, when it set one (`value` may be `undefined`, which clears it). */
  flowState: { value: unknown } | null = null;
  /**
   * Presentation of assistant replies, by index in {@link produced}: made with the first, as
   * most runs have none and an empty Map is 180 bytes for the run's life (docs/benchmarks.md,
   * "Memory per open stream").
   */
  #optionsByReply: Map<number, ReplyOptions> | null = null;
  /** Variables the flow set, merged (made with the first: most runs set none). */
  #variables: Record<string, unknown> | null = null;
  /** Reply options given before any reply: they go to the next one. */
  #pendingOptions: ReplyOptions | null = null;
  /** The flow asked a question (`pause`). */
  #asked = false;
  #livechatMode: ConversationMode | null = null;
  #stepId: string | null = null;
  #nodeType: string | null = null;
  /**
   * The text being written: its pieces, joined when it closes. A string grown by `+=` is a
   * tree of 32-byte nodes, one per delta, kept for the text's life; an array holds each
   * piece for 8 (docs/benchmarks.md, "Memory per open stream").
   */
  #open: { id: string; pieces: string[]; toolCalls?: ToolCall[] } | null = null;
  readonly #options: TranscriptOptions;

  constructor(options: TranscriptOptions) {
    this.#options = options;
  }

  /** The stored message of the run for `role` and `content`, in the current step. */
  message(role: MessageRole, content: string, timestamp = isoNow(), stepId = this.#stepId, nodeType = this.#nodeType): NewMessage {
    return agentMessage(this.#options.runId, role, content, timestamp, this.#options.estimateTokens(content), stepId, nodeType);
  }

  /** Applies one event; returns the parts to send for it (none when not live). */
  apply(event: FlowEvent): readonly TextPart[] {
    switch (event.type) {
      case "step": {
        const parts = this.#closeText();
        this.#stepId = newUuid();
        this.#nodeType = event.nodeType;
        if (this.executionOrder.length === 0) this.executionOrder = [event.name];
        else this.executionOrder.push(event.name);
        return parts;
      }
      case "text-delta":
        return this.#delta(event.delta);
      case "message": {
        if (event.role === "assistant") {
          // Tool calls without text belong to the reply being written (a model's step that
          // spoke, then called tools), or stand alone without sending an empty text.
          if (event.content === "" && event.toolCalls) return this.#toolCalls(event.toolCalls);
          const parts = this.#wholeText(event.content);
          if (event.toolCalls) (this.produced[this.produced.length - 1] as NewMessage).toolCalls = event.toolCalls;
          return parts;
        }
        const parts = this.#closeText();
        const tool = this.message("tool", event.content);
        tool.toolCallId = event.toolCallId ?? null;
        tool.toolCalls = event.toolCalls ?? null;
        this.produced.push(tool);
        return parts;
      }
      case "pause":
        this.#asked = true;
        return this.#wholeText(event.question);
      case "handover":
        this.#livechatMode = "livechat_waiting";
        return event.message === undefined ? NO_PARTS : this.#wholeText(event.message);
      case "state":
        this.flowState = { value: event.state };
        return NO_PARTS;
      case "reply-options":
        this.#replyOptions(event);
        return NO_PARTS;
      case "variables":
        this.#variables = Object.assign(this.#variables ?? {}, event.variables);
        return NO_PARTS;
    }
  }

  /** Options for the text being written, else the last reply, else the next one. */
  #replyOptions(event: ReplyOptions): void {
    const options: ReplyOptions = {};
    if (event.suggestions !== undefined) options.suggestions = event.suggestions;
    if (event.sources !== undefined) options.sources = event.sources;
    if (event.expectedResponseType !== undefined) options.expectedResponseType = event.expectedResponseType;
    const last = this.produced.length - 1;
    if (this.#open === null && last >= 0 && (this.produced[last] as NewMessage).role === "assistant") {
      this.#optionsByReply ??= new Map();
      this.#optionsByReply.set(last, { ...this.#optionsByReply.get(last), ...options });
    } else {
      this.#pendingOptions = { ...this.#pendingOptions, ...options };
    }
  }

  /** Whether the flow handed the conversation over to live chat (and nobody refused it since). */
  get handedOver(): boolean {
    return this.#livechatMode !== null;
  }

  /**
   * Nobody can take the handover (decisions.md: `livechat_unavailable`): the run is not
   * paused by it, and its outcome reports no live-chat mode.
   */
  refuseHandover(): void {
    this.#livechatMode = null;
  }

  /**
   * Closes the text left open when the flow ends, cancelled runs included: a resumed
   * stream's followers still read it, and its end part keeps the contract's order.
   */
  end(): readonly TextPart[] {
    return this.#closeText();
  }

  /** The run's outcome; a run that succeeded after a pause or a handover is `pending`. */
  outcome(runId: string, conversationId: string, end: RunEnd): RunOutcome {
    const paused = this.#asked || this.#livechatMode !== null;
    const status = end.status === "success" && paused ? "pending" : end.status;
    return {
      runId,
      conversationId,
      status,
      result: status === "error" ? null : end.result,
      error: end.error,
      produced: this.produced,
      executionOrder: this.executionOrder,
      startedAt: end.startedAt,
      completedAt: end.completedAt,
      durationMs: end.durationMs,
      livechatMode: status === "pending" ? this.#livechatMode : null,
      replyOptions: this.#optionsByReply ?? new Map(),
      variables: this.#variables ?? {},
    };
  }

  #delta(delta: string): readonly TextPart[] {
    if (delta === "") return NO_PARTS;
    const live = this.#options.live;
    let open = this.#open;
    let start: TextPart | null = null;
    if (!open) {
      open = this.#open = { id: newUuid(), pieces: [delta] };
      if (live) start = { type: "text-start", id: open.id };
    } else {
      open.pieces.push(delta);
    }
    if (!live) return NO_PARTS;
    const part: TextPart = { type: "text-delta", id: open.id, delta };
    return start ? [start, part] : [part];
  }

  /** A whole text as one message: start, its content as one delta, end. */
  #wholeText(content: string): readonly TextPart[] {
    const before = this.#closeText();
    const id = newUuid();
    this.#open = { id, pieces: [content] };
    const after = this.#closeText();
    if (!this.#options.live) return NO_PARTS;
    const parts: TextPart[] = [...before, { type: "text-start", id }];
    if (content !== "") parts.push({ type: "text-delta", id, delta: content });
    parts.push(...after);
    return parts;
  }

  /** Tool calls on the text being written, closing it; else on a message of their own, with no text sent. */
  #toolCalls(toolCalls: ToolCall[]): readonly TextPart[] {
    if (this.#open) {
      this.#open.toolCalls = toolCalls;
      return this.#closeText();
    }
    const message = this.message("assistant", "");
    message.toolCalls = toolCalls;
    this.produced.push(message);
    return NO_PARTS;
  }

  #closeText(): readonly TextPart[] {
    const open = this.#open;
    if (!open) return NO_PARTS;
    this.#open = null;
    const message = this.message("assistant", open.pieces.length === 1 ? (open.pieces[0] as string) : open.pieces.join(""));
    if (open.toolCalls) message.toolCalls = open.toolCalls;
    this.produced.push(message);
    if (this.#pendingOptions) {
      this.#optionsByReply ??= new Map();
      this.#optionsByReply.set(this.produced.length - 1, this.#pendingOptions);
      this.#pendingOptions = null;
    }
    return this.#options.live ? [{ type: "text-end", id: open.id }] : NO_PARTS;
  }
}
