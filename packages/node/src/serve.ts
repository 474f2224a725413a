import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type NodeHandlerOptions, toNodeHandler, type WebHandler } from "./handler.js";

/** Options of {@link serve}. */
export interface ServeOptions extends NodeHandlerOptions {
  /** Port to listen on (default 3000; 0 picks a free one). */
  port?: number;
  /** Interface to bind (default `127.0.0.1`). */
  host?: string;
}

/** A listening server. */
export interface RunningServer {
  server: Server;
  /** `http://host:port` of the listening socket. */
  url: string;
  port: number;
  /** Stops accepting connections and ends idle keep-alive ones. */
  close(): Promise<void>;
}

/** Starts a node:http server for a channel service and resolves once it listens. */
export function serve(service: WebHandler, options: ServeOptions = {}): Promise<RunningServer> {
  const host = options.host ?? "127.0.0.1";
  const server = createServer(toNodeHandler(service, options));
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 3000, host, () => {
      server.off("error", reject);
      const { port } = server.address() as AddressInfo;
      const shown = host.includes(":") ? `[${host}]` : host;
      resolve({
        server,
        port,
        url: `http://${shown}:${port}`,
        close: () =>
          new Promise<void>((done, fail) => {
            server.close((error) => (error ? fail(error) : done()));
            server.closeIdleConnections();
          }),
      });
    });
  });
}
