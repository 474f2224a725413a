import type { ServerResponse } from "node:http";
import { fromResponse, isReplyStream, type Reply, type ReplyStream } from "@channelkit/core/adapter";

/**
 * Writes a channel service's {@link Reply} to a Node response: a body known whole in one
 * write with its length, a stream as it is produced, the next chunk pulled only once the
 * socket took the previous one (back-pressure).
 */
export async function writeReply(res: ServerResponse, reply: Reply): Promise<void> {
  return sendReply(res, reply);
}

/**
 * {@link writeReply} without a promise of its own: a body known whole is written at once, a
 * stream's writing is returned (it never rejects). Throws when the head cannot be written.
 * handleNodeRequest returns a stream's writing as it is: each promise chained to it would be
 * kept for as long as the stream is open (docs/benchmarks.md, "Memory per open stream").
 */
export function sendReply(res: ServerResponse, reply: Reply): Promise<void> | undefined {
  const { body } = reply;
  if (!isReplyStream(body)) {
    if (body === null) {
      res.writeHead(reply.status, reply.statusText, reply.headers);
      res.end();
      return;
    }
    reply.headers["content-length"] = String(typeof body === "string" ? Buffer.byteLength(body) : body.byteLength);
    res.writeHead(reply.status, reply.statusText, reply.headers);
    res.end(body);
    return;
  }
  res.writeHead(reply.status, reply.statusText, reply.headers);
  return writeStream(res, body);
}

/** Writes a Web Response to a Node response as it is produced, with back-pressure. */
export function writeWebResponse(res: ServerResponse, response: Response): Promise<void> {
  return writeReply(res, fromResponse(response));
}

/**
 * Writes a stream to its end; never rejects (a failure cuts the connection). The one
 * function suspended while a stream waits for its next chunk: its callers return its promise
 * rather than await it, and `close` is listened to with `on`, not `once` and its wrapper
 * (docs/benchmarks.md, "Memory per open stream").
 *
 * After the first, the frames a run produces together (in one drain of the microtask queue,
 * such as a reply's words from a flow that never waits) leave in one write at its end
 * (`process.nextTick`, which runs once the microtasks are done): node:http frames and queues
 * each write of a chunked body on its own, 57 pieces for an echo stream written an event at a
 * time, 13 so (docs/benchmarks.md, "Why the code looks like this"). A frame never waits for
 * I/O or a timer.
 */
async function writeStream(res: ServerResponse, stream: ReplyStream): Promise<void> {
  let ended = false;
  const cancel = () => {
    if (!ended) stream.cancel();
  };
  res.on("close", cancel);
  /** Frames pulled since the last write, written when the microtasks are done. */
  let pending = "";
  const flush = () => {
    if (pending !== "" && !res.destroyed && !res.writableEnded) res.write(pending);
    pending = "";
  };
  try {
    let next = stream.pull();
    // The status line goes out at once when no chunk is ready, so that the client sees it
    // before the first event; when one is (the UI stream's `data-run`), both leave in one
    // packet.
    if (next instanceof Promise) res.flushHeaders();
    let first = true;
    for (;;) {
      const chunk = await next;
      if (chunk === null) break;
      if (res.destroyed) {
        // A client gone before this point was not heard by the `close` listener (it left
        // before the head was written): the stream is told here, or its run would wait for
        // a reader forever and hold its conversation's turn (docs/reliability.md).
        cancel();
        return;
      }
      if (first) {
        first = false;
        res.write(chunk);
        // node:http holds writes until the end of the tick to send them together; the first
        // event must not wait for the work that follows it in the same tick (a run that never
        // awaits, up to its stored end), so it is sent now.
        if (res.socket?.writableCorked) res.socket.uncork();
      } else if (typeof chunk === "string") {
        if (pending === "") process.nextTick(flush);
        pending += chunk;
        // A run that produces more than the socket holds without waiting is written now, so
        // that the back-pressure below holds it.
        if (pending.length >= res.writableHighWaterMark) flush();
      } else {
        flush();
        res.write(chunk);
      }
      // Back-pressure: the next chunk is pulled once the socket took what was written. A
      // write made by `flush` since is seen here at the next chunk.
      if (res.writableNeedDrain) await drained(res);
      next = stream.pull();
    }
    ended = true;
    // The last frames leave with the end of the body.
    if (pending === "") res.end();
    else res.end(pending);
    pending = "";
  } catch {
    ended = true;
    pending = "";
    res.destroy();
  } finally {
    res.off("close", cancel);
  }
}

function drained(res: ServerResponse): Promise<void> {
  return new Promise<void>((resolve) => {
    const settle = () => {
      res.off("drain", settle);
      res.off("close", settle);
      resolve();
    };
    res.on("drain", settle);
    res.on("close", settle);
  });
}
