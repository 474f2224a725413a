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
  /** Stops accepting connections and ends keep-alive ones as they go idle; resolves once every connection is closed. */
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
            // A keep-alive connection whose response ends after this (a stream the service
            // ends as it closes) goes idle later: it is closed then, not after the
            // keep-alive timeout.
            const idle = setInterval(() => server.closeIdleConnections(), 50);
            server.close((error) => {
              clearInterval(idle);
              if (error) fail(error);
              else done();
            });
            server.closeIdleConnections();
          }),
      });
    });
  });
}
