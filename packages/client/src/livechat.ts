import { ChannelkitError } from "./errors.js";
import { sseJson } from "./sse.js";
import type { LiveChatEvent } from "./types.js";

/**
 * A conversation's live chat, followed live: an async iterable of {@link LiveChatEvent}s, read
 * once. First `{ type: "mode", … }` (the mode now), then each live-chat message (the human
 * side's, and the user's to it) and each change of mode, until {@link close}, the call's
 * `signal`, or a `break` out of the loop. The service never ends it by itself; when the
 * connection drops (an instance going away) the loop ends, and `subscribe(id, { after:
 * subscription.lastEventId })` goes on from the last message seen.
 *
 * @example
 * const events = await client.livechat.subscribe(conversationId);
 * for await (const event of events) {
 *   if (event.type === "message") console.log(event.message.sender, event.message.content);
 *   else if (event.mode === "livechat_closed") break;
 * }
 */
export class LiveChatSubscription implements AsyncIterable<LiveChatEvent> {
  /** The answer, for its headers; its body belongs to the subscription. */
  readonly response: Response;
  readonly #reader: ReadableStreamDefaultReader<Uint8Array>;
  readonly #signal: AbortSignal | undefined;
  #lastEventId: number | undefined;
  #used = false;

  /** @internal */
  constructor(response: Response, signal: AbortSignal | undefined, after: number | undefined) {
    if (!response.body) throw new ChannelkitError({ status: response.status, code: "invalid_response", message: "The subscription's answer has no body." });
    this.response = response;
    this.#reader = response.body.getReader();
    this.#signal = signal;
    this.#lastEventId = after;
  }

  /** The turn index of the last message read (or the `after` it started from): where a new subscription goes on. */
  get lastEventId(): number | undefined {
    return this.#lastEventId;
  }

  /** The events, as they come. */
  async *[Symbol.asyncIterator](): AsyncGenerator<LiveChatEvent, void, undefined> {
    if (this.#used) throw new Error("channelkit: a subscription is read once");
    this.#used = true;
    for await (const { id, data } of sseJson(this.#reader, this.#signal)) {
      const event = data as LiveChatEvent;
      if (event.type !== "mode" && event.type !== "message") continue;
      if (id !== undefined && /^-?\d+$/.test(id)) this.#lastEventId = Number(id);
      yield event;
    }
  }

  /** Closes the connection; a loop reading the events ends. */
  async close(): Promise<void> {
    this.#used = true;
    await this.#reader.cancel().catch(() => {});
  }
}
