import type { IncomingMessage } from "node:http";

/**
 * A Web Request for a Node request. The body stays a stream of the exact bytes received, so
 * an HMAC over it holds; `signal` aborts when the client goes away.
 */
export function toWebRequest(req: IncomingMessage, signal: AbortSignal, baseUrl?: string): Request {
  const origin = baseUrl ?? `http://${req.headers.host ?? "localhost"}`;
  const headers = new Headers();
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    headers.append(req.rawHeaders[i] as string, req.rawHeaders[i + 1] as string);
  }
  const method = req.method ?? "GET";
  const hasBody = method !== "GET" && method !== "HEAD";
  const init: RequestInit & { duplex?: "half" } = { method, headers, signal };
  if (hasBody) {
    init.body = bodyStream(req);
    init.duplex = "half";
  }
  return new Request(new URL(req.url ?? "/", origin), init);
}

/**
 * The request body as a Web stream that touches the socket only when read. `Readable.toWeb`
 * is not used: it starts consuming at once, so a body the handler never reads (a 415, a 413
 * on Content-Length) was left unread on a keep-alive connection, whose next request then
 * failed with ECONNRESET; and cancelling it made Node throw an uncaught "Controller is
 * already closed" when more data arrived.
 */
function bodyStream(req: IncomingMessage): ReadableStream<Uint8Array> {
  let listening = false;
  let done = false;
  return new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        if (!listening) {
          listening = true;
          req.on("data", (chunk: Buffer) => {
            if (done) return;
            controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
            if ((controller.desiredSize ?? 0) <= 0) req.pause();
          });
          req.once("end", () => {
            if (done) return;
            done = true;
            controller.close();
          });
          req.once("error", (error) => {
            if (done) return;
            done = true;
            controller.error(error);
          });
          // A client gone mid-upload must not leave the handler waiting for the rest forever.
          req.once("close", () => {
            if (done) return;
            done = true;
            controller.error(new Error("The request closed before its body ended"));
          });
        }
        req.resume();
      },
      cancel() {
        // The rest is discarded rather than the socket destroyed: the error response (a 413)
        // must still reach the client, and the connection stays usable.
        done = true;
        req.resume();
      },
    },
    // Nothing is read before the handler asks, so Node drains an unread body by itself.
    { highWaterMark: 0 },
  );
}
