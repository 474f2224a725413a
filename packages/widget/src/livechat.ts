import { EventSourceParserStream } from "eventsource-parser/stream";
import { type Connection, type LiveChatMode, liveChatMode, openLiveChat } from "./api.js";
import { WidgetRequestError } from "./errors.js";

/** What a live-chat subscription reports. */
export interface LiveChatHandlers {
  /** The conversation's mode, first and on each change. */
  mode(mode: LiveChatMode): void;
  /** A message of the human side (the user's own to it are not reported: the widget shows what it sent). */
  message(message: { turn: number; sender: string; content: string }): void;
}

/** Waits between two reconnections, growing to this, in ms. */
const MAX_RECONNECT_MS = 15_000;

/**
 * Follows a conversation's live chat until `signal` aborts: the subscription route, read
 * with fetch (an `EventSource` cannot send the key), reconnected with backoff from the last
 * turn it saw when the connection drops. A refusal (the key revoked, the conversation
 * gone) ends it.
 */
export async function followLiveChat(
  connection: Connection,
  conversationId: string,
  afterTurn: number | null,
  handlers: LiveChatHandlers,
  signal: AbortSignal,
) {
  let after = afterTurn;
  let wait = 500;
  while (!signal.aborted) {
    try {
      const body = await openLiveChat(connection, conversationId, after, signal);
      wait = 500;
      const decoder = new TextDecoderStream() as unknown as ReadableWritablePair<string, Uint8Array>;
      const reader = body.pipeThrough(decoder).pipeThrough(new EventSourceParserStream()).getReader();
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          let event: { type?: unknown; message?: { turn_index?: unknown; sender?: unknown; content?: unknown } };
          try {
            event = JSON.parse(value.data);
          } catch {
            continue;
          }
          if (event.type === "mode") handlers.mode(liveChatMode(event));
          const message = event.message;
          if (event.type !== "message" || typeof message?.turn_index !== "number") continue;
          after = message.turn_index;
          if (typeof message.sender === "string" && message.sender !== "user" && typeof message.content === "string") {
            handlers.message({ turn: message.turn_index, sender: message.sender, content: message.content });
          }
        }
      } finally {
        reader.cancel().catch(() => {});
      }
    } catch (error) {
      if (signal.aborted) return;
      // A refusal is not passing: following again would be refused again.
      if (error instanceof WidgetRequestError && error.status >= 400 && error.status < 500 && error.status !== 408 && error.status !== 429) return;
    }
    if (signal.aborted) return;
    // From the last turn seen, so that nothing said meanwhile is missed.
    after ??= -1;
    await new Promise((resolve) => setTimeout(resolve, wait));
    wait = Math.min(MAX_RECONNECT_MS, wait * 2);
  }
}
