import type { ServerResponse } from "node:http";

const NOT_YET = Symbol("not yet");
/** Settled already: a race against it tells whether a read has its chunk now. */
const SETTLED = Promise.resolve(NOT_YET);

/**
 * Writes a Web Response to a Node response as it is produced: no buffering, and the next
 * chunk is read only once the socket took the previous one (back-pressure).
 */
export async function writeWebResponse(res: ServerResponse, response: Response): Promise<void> {
  const headers: Record<string, string | string[]> = {};
  response.headers.forEach((value, name) => {
    if (name === "set-cookie") return;
    headers[name] = value;
  });
  const cookies = response.headers.getSetCookie();
  if (cookies.length > 0) headers["set-cookie"] = cookies;
  res.writeHead(response.status, response.statusText || undefined, headers);

  if (response.body === null) {
    res.end();
    return;
  }
  const reader = response.body.getReader();
  const cancel = () => void reader.cancel().catch(() => undefined);
  res.once("close", cancel);
  try {
    let next = reader.read();
    const eventStream = headers["content-type"]?.toString().startsWith("text/event-stream") === true;
    // A stream's status line goes out at once, so that the client sees it before the first
    // event; when that event is already there (the UI stream's `data-run`), both leave in
    // one packet instead. Small JSON bodies are sent whole, with their headers.
    if (eventStream && (await Promise.race([next, SETTLED])) === NOT_YET) res.flushHeaders();
    let first = eventStream;
    for (;; next = reader.read()) {
      const { done, value } = await next;
      if (done) break;
      if (res.destroyed) return;
      const flowing = res.write(value);
      if (first) {
        first = false;
        // node:http holds writes until the end of the tick to send them together; the first
        // event must not wait for the work that follows it in the same tick (a run that never
        // awaits, up to its stored end), so it is sent now.
        if (res.socket?.writableCorked) res.socket.uncork();
      }
      if (!flowing) {
        await new Promise<void>((resolve) => {
          const settle = () => {
            res.off("drain", settle);
            res.off("close", settle);
            resolve();
          };
          res.on("drain", settle);
          res.on("close", settle);
        });
      }
    }
    res.end();
  } catch {
    res.destroy();
  } finally {
    res.off("close", cancel);
  }
}
