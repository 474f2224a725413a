import type { IncomingMessage, ServerResponse } from "node:http";
import { assertChannelService, errorEnvelope, fromResponse, type IncomingRequest, type Reply } from "@channelkit/core/adapter";
import { ClientLink } from "./client.js";
import { NodeIncomingRequest, toWebRequest, type WebRequestOverrides } from "./request.js";
import { sendReply } from "./response.js";

/**
 * Anything with a Web `handler`, such as a channel service. A channel service also has
 * `dispatch`, which the adapter then uses: the same answer without building a Web Request
 * and Response, which on Node 20 cost more than the rest of a request.
 */
export interface WebHandler {
  handler(request: Request): Promise<Response>;
  dispatch?(request: IncomingRequest): Promise<Reply>;
}

/** Options of {@link toNodeHandler}. */
export interface NodeHandlerOptions {
  /** Origin used to build request URLs (default: `http://` + the Host header). */
  baseUrl?: string;
}

/** Options of {@link handleNodeRequest}: those of {@link toNodeHandler}, plus what a framework adapter knows better. */
export interface NodeRequestOptions extends NodeHandlerOptions, WebRequestOverrides {}

/** The envelope of a failure of the service itself, as core answers it. */
const RUNTIME_ERROR = errorEnvelope("runtime_error");

/**
 * Answers one Node request with a channel service: the request translated (exact body bytes,
 * client disconnect → `onClientGone` and an aborted signal), the answer streamed back with
 * back-pressure. Never rejects: a failure before the status line is a 500 `runtime_error`,
 * one after it cuts the connection. The building block of {@link toNodeHandler} and of the
 * Express and Fastify adapters.
 *
 * @example
 * app.post("/public/v1/api/execute", (req, res) => handleNodeRequest(service, req, res));
 */
export async function handleNodeRequest(service: WebHandler, req: IncomingMessage, res: ServerResponse, options: NodeRequestOptions = {}): Promise<void> {
  let written: Promise<void> | undefined;
  try {
    const reply = service.dispatch
      ? await service.dispatch(new NodeIncomingRequest(req, res, options.baseUrl, options))
      : fromResponse(await service.handler(toWebRequest(req, new ClientLink(res).signal, options.baseUrl, options)));
    // A body refused before it all arrived (413) would otherwise be drained to its end, on a
    // connection that then answers its read timeout as a second response to the same request.
    if (reply.status === 413 && !req.complete) res.shouldKeepAlive = false;
    written = sendReply(res, reply);
  } catch {
    failed(res);
    return;
  }
  // A stream's writing, which never rejects, returned rather than awaited: an open stream
  // then holds no frame of this function (docs/benchmarks.md, "Memory per open stream").
  return written;
}

/** A failure of the service: 500 `runtime_error` before the status line, a cut connection after it. */
function failed(res: ServerResponse): void {
  if (!res.headersSent) {
    res.writeHead(500, { "content-type": "application/json; charset=utf-8" });
    res.end(RUNTIME_ERROR);
  } else {
    res.destroy();
  }
}

/**
 * A node:http request listener for a channel service. It only translates: bytes in, a
 * streamed Response out, and the client going away turned into an aborted request signal.
 * Given the promise of `createChannelService()` rather than the service (a forgotten
 * `await`), it throws a TypeError saying so.
 *
 * @example
 * http.createServer(toNodeHandler(service)).listen(3000);
 */
export function toNodeHandler(service: WebHandler, options: NodeHandlerOptions = {}) {
  assertChannelService(service, "toNodeHandler(service)");
  return (req: IncomingMessage, res: ServerResponse): Promise<void> => handleNodeRequest(service, req, res, options);
}
