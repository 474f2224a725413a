import { createParser, type EventSourceMessage } from "eventsource-parser";
import { ChannelkitError } from "./errors.js";

/**
 * The server-sent events of a response body (through its reader), in order, parsed with
 * eventsource-parser (comments such as `: keep-alive` are skipped). Stopping early cancels the
 * body, which closes the connection. A body that breaks is a `network_error`; an abort throws
 * the signal's reason, and nothing is yielded after it.
 */
export async function* sseMessages(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  signal: AbortSignal | undefined,
): AsyncGenerator<EventSourceMessage, void, undefined> {
  const queue: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (message) => queue.push(message) });
  const decoder = new TextDecoder();
  try {
    for (;;) {
      let read: ReadableStreamReadResult<Uint8Array>;
      try {
        read = await reader.read();
      } catch (error) {
        if (signal?.aborted) throw signal.reason;
        throw new ChannelkitError({ status: 0, code: "network_error", message: "The connection broke while the stream was read.", cause: error });
      }
      if (signal?.aborted) throw signal.reason;
      // An event cut off by the end of the body is dropped, as the SSE standard says.
      parser.feed(read.done ? decoder.decode() : decoder.decode(read.value, { stream: true }));
      while (queue.length > 0) {
        // Once aborted, nothing more is read, even what already arrived with the last bytes.
        if (signal?.aborted) throw signal.reason;
        yield queue.shift() as EventSourceMessage;
      }
      if (read.done) return;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

/** The JSON `data` of each event; events whose data is not JSON (`[DONE]`) are skipped. */
export async function* sseJson(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  signal: AbortSignal | undefined,
): AsyncGenerator<{ id: string | undefined; data: unknown }, void, undefined> {
  for await (const message of sseMessages(reader, signal)) {
    let data: unknown;
    try {
      data = JSON.parse(message.data);
    } catch {
      continue;
    }
    yield { id: message.id, data };
  }
}
