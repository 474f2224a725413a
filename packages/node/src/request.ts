import type { IncomingMessage } from "node:http";
import { Readable } from "node:stream";

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
    init.body = Readable.toWeb(req) as unknown as ReadableStream<Uint8Array>;
    init.duplex = "half";
  }
  return new Request(new URL(req.url ?? "/", origin), init);
}
