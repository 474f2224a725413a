import { ChannelkitError } from "./errors.js";
import { sseJson } from "./sse.js";
import type { ConversationMode, RunIds, RunStatus } from "./types.js";

/** The stream's first chunk: the run's ids. channelkit's own part of the protocol. */
export interface DataRunChunk {
  type: "data-run";
  data: RunIds;
}
/** A text (an assistant message) begins; `id` names it in the chunks that follow. */
export interface TextStartChunk {
  type: "text-start";
  id: string;
}
/** A piece of the text `id`. */
export interface TextDeltaChunk {
  type: "text-delta";
  id: string;
  delta: string;
}
/** The text `id` is complete. */
export interface TextEndChunk {
  type: "text-end";
  id: string;
}
/**
 * The run ended (also when it paused, handed over or was cancelled): the stream's last chunk.
 * `messageMetadata` says how (the AI SDK's `useChat` shows it as the message's `metadata`).
 */
export interface FinishChunk {
  type: "finish";
  finishReason?: string;
  messageMetadata?: FinishMetadata;
}

/** The run's outcome, carried by {@link FinishChunk}: as the JSON answer's `status` and `output.metadata.livechat_mode`. */
export interface FinishMetadata {
  /** `success`, `pending` (paused, or handed over) or `cancelled`; a failed run ends with an `error` chunk instead. */
  status: Exclude<RunStatus, "error">;
  /** `livechat_waiting` when the run handed over, the current mode when a human has the conversation, else null. */
  livechat_mode: ConversationMode | null;
}
/** The run failed after the stream began: the stream's last chunk; no `finish` follows. */
export interface ErrorChunk {
  type: "error";
  errorText: string;
}
/** The AI SDK's chunks that channelkit does not send today, typed so that a `switch` on newer services reads them. */
export type OtherUIMessageChunk =
  | { type: "start"; messageId?: string; messageMetadata?: unknown }
  | { type: "start-step" }
  | { type: "finish-step" }
  | { type: "tool-input-start"; toolCallId: string; toolName: string; dynamic?: boolean }
  | { type: "tool-input-delta"; toolCallId: string; inputTextDelta: string }
  | { type: "tool-input-available"; toolCallId: string; toolName: string; input: unknown; dynamic?: boolean }
  | { type: "tool-output-available"; toolCallId: string; output: unknown; dynamic?: boolean }
  | { type: "tool-output-error"; toolCallId: string; errorText: string; dynamic?: boolean }
  | { type: "abort"; reason?: string };

/**
 * A chunk of the Vercel AI SDK's UI message stream as channelkit sends it: `data-run` first,
 * then per assistant message `text-start`, `text-delta`…, `text-end`, then `finish`, or `error`
 * when the flow failed (and nothing after it). Chunks of other types are passed through as they
 * come.
 */
export type UIMessageChunk = DataRunChunk | TextStartChunk | TextDeltaChunk | TextEndChunk | FinishChunk | ErrorChunk | OtherUIMessageChunk;

/**
 * A streamed run: an async iterable of its {@link UIMessageChunk}s, read once, with helpers.
 * What `stream()`, `resume()`, `widget.chat()` and `widget.resume()` resolve to, once the
 * answer's status and the first chunk (`data-run`) have arrived.
 *
 * Leaving a `for await` loop early, {@link cancel} or the call's `signal` closes the
 * connection: on a channel without resumable streams that cancels the run (stored
 * `cancelled`); on one with them the run goes on, and `resume()` reads it again.
 *
 * @example
 * const reply = await client.stream({ payload: "Hello" });
 * console.log(reply.run?.conversation_id);
 * for await (const chunk of reply) if (chunk.type === "text-delta") process.stdout.write(chunk.delta);
 */
export class ChannelkitStream implements AsyncIterable<UIMessageChunk> {
  /** The ids of the `data-run` chunk (the stream's first), or null if the stream did not begin with one. */
  readonly run: RunIds | null;
  /** The answer, for its headers (`RateLimit`, ...); its body belongs to the stream. */
  readonly response: Response;
  readonly #reader: ReadableStreamDefaultReader<Uint8Array>;
  readonly #chunks: AsyncGenerator<UIMessageChunk, void, undefined>;
  readonly #first: UIMessageChunk | undefined;
  #used = false;
  #cancelled = false;

  private constructor(
    response: Response,
    reader: ReadableStreamDefaultReader<Uint8Array>,
    chunks: AsyncGenerator<UIMessageChunk, void, undefined>,
    first: UIMessageChunk | undefined,
  ) {
    this.response = response;
    this.#reader = reader;
    this.#chunks = chunks;
    this.#first = first;
    this.run = first?.type === "data-run" ? first.data : null;
  }

  /**
   * A stream of a UI message stream answer fetched some other way (a `200` with
   * `text/event-stream`): resolves once its first chunk is read. The client's methods use it.
   *
   * @param response - The answer, its body not yet read.
   * @param signal - The signal the request was sent with, so that an abort reads as one.
   */
  static async open(response: Response, signal: AbortSignal | undefined): Promise<ChannelkitStream> {
    if (!response.body) throw new ChannelkitError({ status: response.status, code: "invalid_response", message: "The stream's answer has no body." });
    const reader = response.body.getReader();
    const chunks = uiChunks(reader, signal);
    const first = await chunks.next();
    return new ChannelkitStream(response, reader, chunks, first.done ? undefined : first.value);
  }

  /** The run's id, from `data-run`. */
  get runId(): string | undefined {
    return this.run?.run_id;
  }

  /** The conversation's id, from `data-run`: pass it back as `conversation_id` to go on. */
  get conversationId(): string | undefined {
    return this.run?.conversation_id;
  }

  /**
   * Every chunk, `data-run` included, to the last. An `error` chunk is yielded like any other
   * (the stream ends after it); a body that ends with neither `finish` nor `error` throws
   * `stream_interrupted`. A stream is read once.
   */
  async *[Symbol.asyncIterator](): AsyncGenerator<UIMessageChunk, void, undefined> {
    if (this.#used) throw new Error("channelkit: a stream is read once (for await, text() or cancel())");
    this.#used = true;
    try {
      let last = this.#first;
      if (last) yield last;
      for (let step = await this.#chunks.next(); !step.done; step = await this.#chunks.next()) {
        last = step.value;
        yield last;
      }
      if (last?.type !== "finish" && last?.type !== "error" && !this.#cancelled) {
        throw new ChannelkitError({ status: this.response.status, code: "stream_interrupted", message: "The stream ended before its finish." });
      }
    } finally {
      await this.#chunks.return();
    }
  }

  /**
   * Reads the stream to its end and resolves to its text: every `text-delta` in order (the
   * assistant messages one after the other). Rejects with `stream_error` (the chunk's
   * `errorText` as the message) when the run failed.
   */
  async text(): Promise<string> {
    let text = "";
    for await (const chunk of this) {
      if (chunk.type === "text-delta") text += chunk.delta;
      else if (chunk.type === "error") throw new ChannelkitError({ status: this.response.status, code: "stream_error", message: chunk.errorText });
    }
    return text;
  }

  /**
   * Stops reading and closes the connection (see the class's notes for what happens to the
   * run); a loop reading the stream ends quietly.
   */
  async cancel(): Promise<void> {
    this.#used = true;
    this.#cancelled = true;
    await this.#reader.cancel().catch(() => {});
  }
}

async function* uiChunks(reader: ReadableStreamDefaultReader<Uint8Array>, signal: AbortSignal | undefined): AsyncGenerator<UIMessageChunk, void, undefined> {
  for await (const { data } of sseJson(reader, signal)) {
    if (typeof data === "object" && data !== null && typeof (data as { type?: unknown }).type === "string") yield data as UIMessageChunk;
  }
}
