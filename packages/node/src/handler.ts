import type { IncomingMessage, ServerResponse } from "node:http";
import { toWebRequest, type WebRequestOverrides } from "./request.js";
import { writeWebResponse } from "./response.js";

/** Anything with a Web `handler`, such as a channel service. */
export interface WebHandler {
  handler(request: Request): Promise<Response>;
}

/** Options of {@link toNodeHandler}. */
export interface NodeHandlerOptions {
  /** Origin used to build request URLs (default: `http://` + the Host header). */
  baseUrl?: string;
}

/** Options of {@link handleNodeRequest}: those of {@link toNodeHandler}, plus what a framework adapter knows better. */
export interface NodeRequestOptions extends NodeHandlerOptions, WebRequestOverrides {}

/** The envelope of a failure of the service itself, as core answers it. */
const RUNTIME_ERROR = JSON.stringify({ error: { code: "runtime_error", message: "An unexpected error occurred in the service." } });

/**
 * Answers one Node request with a channel service: the request translated to a Web Request
 * (exact body bytes, client disconnect → aborted signal), the Web Response streamed back with
 * back-pressure. Never rejects: a failure before the status line is a 500 `runtime_error`,
 * one after it cuts the connection. The building block of {@link toNodeHandler} and of the
 * Express and Fastify adapters.
 *
 * @example
 * app.post("/public/v1/api/execute", (req, res) => handleNodeRequest(service, req, res));
 */
export async function handleNodeRequest(
  service: WebHandler,
  req: IncomingMessage,
  res: ServerResponse,
  options: NodeRequestOptions = {},
): Promise<void> {
  const controller = new AbortController();
  // `close` on the response fires when the exchange ends either way; only an early one is a disconnect.
  res.once("close", () => {
    if (!res.writableFinished) controller.abort(new Error("client disconnected"));
  });
  try {
    const response = await service.handler(toWebRequest(req, controller.signal, options.baseUrl, options));
    await writeWebResponse(res, response);
  } catch {
    if (!res.headersSent) {
      res.writeHead(500, { "content-type": "application/json; charset=utf-8" });
      res.end(RUNTIME_ERROR);
    } else {
      res.destroy();
    }
  }
}

/**
 * A node:http request listener for a channel service. It only translates: bytes in, a
 * streamed Response out, and the client going away turned into an aborted request signal.
 *
 * @example
 * http.createServer(toNodeHandler(service)).listen(3000);
 */
export function toNodeHandler(service: WebHandler, options: NodeHandlerOptions = {}) {
  return (req: IncomingMessage, res: ServerResponse): Promise<void> => handleNodeRequest(service, req, res, options);
}
