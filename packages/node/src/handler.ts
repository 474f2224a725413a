import type { IncomingMessage, ServerResponse } from "node:http";
import { toWebRequest } from "./request.js";
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

/**
 * A node:http request listener for a channel service. It only translates: bytes in, a
 * streamed Response out, and the client going away turned into an aborted request signal.
 *
 * @example
 * http.createServer(toNodeHandler(service)).listen(3000);
 */
export function toNodeHandler(service: WebHandler, options: NodeHandlerOptions = {}) {
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const controller = new AbortController();
    // `close` on the response fires when the exchange ends either way; only an early one is a disconnect.
    res.once("close", () => {
      if (!res.writableFinished) controller.abort(new Error("client disconnected"));
    });
    try {
      const response = await service.handler(toWebRequest(req, controller.signal, options.baseUrl));
      await writeWebResponse(res, response);
    } catch {
      if (!res.headersSent) {
        res.writeHead(500, { "content-type": "application/json; charset=utf-8" });
        res.end(JSON.stringify({ error: { code: "runtime_error", message: "An unexpected error occurred in the service." } }));
      } else {
        res.destroy();
      }
    }
  };
}
