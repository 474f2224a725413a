import { adminApi, type ChannelService, liveChatInbox, type ChannelServiceOptions, createChannelService, type Logger, type Storage } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { ContractTarget, RunningTarget } from "./types.js";

/** A fixed test master key: signing secrets are sealed as in production. */
const SECRET_KEY = "4f".repeat(32);
/** The HS256 secret of the admin tokens the suite signs. */
const ADMIN_JWT_SECRET = "contract-suite-admin-jwt-secret-0123456789";

/** The suite provokes failures on purpose; the answers, not the log, are what it checks. */
const quiet: Logger = { warn() {}, error() {} };

/** A fresh, empty, migrated store for one target, and how to dispose of it afterwards. */
export interface TestStore {
  storage: Storage;
  /** Marks every API key of a channel as expired, for stores that can reach their database. */
  expireApiKeys?(channelId: string): Promise<void>;
  /** Removes what the store left behind (a temporary file, a test database). */
  dispose(): Promise<void>;
}

/** An HTTP server in front of a service, as {@link ServiceTargetOptions.listen} starts it. */
export interface ListeningServer {
  /** Where the routes are served, without a trailing slash (see {@link RunningTarget.url}). */
  url: string;
  /** Stops the server; the service and the store are closed afterwards by the target. */
  close(): Promise<void>;
}

/** Options of {@link serviceTarget}. */
export interface ServiceTargetOptions {
  /** Shown in the test names, e.g. `express + SQLite`. */
  name: string;
  /** Opens a fresh store, e.g. {@link sqliteTestStore}. */
  store: () => Promise<TestStore>;
  /**
   * Starts an HTTP server on 127.0.0.1 with a free port in front of the service: the only
   * part that differs from one adapter to the next.
   */
  listen: (service: ChannelService) => Promise<ListeningServer>;
  /**
   * Options of the service beyond the defaults: its `basePath`, extra `plugins` (the admin
   * routes are always mounted), its live-chat provider (the inbox, behind the same admin
   * tokens, unless another is given).
   */
  service?: Pick<ChannelServiceOptions, "basePath" | "plugins" | "livechat">;
}

/**
 * A contract target made of a store and an adapter: the service is created on the store with
 * the demo flows, then `listen` puts it behind a server. Every adapter × store pair of the
 * matrix is one call.
 *
 * @example
 * defineContractSuite(serviceTarget({
 *   name: "node:http + SQLite",
 *   store: sqliteTestStore,
 *   listen: (service) => serve(service, { port: 0 }),
 * }));
 */
export function serviceTarget({ name, store, listen, service: serviceOptions }: ServiceTargetOptions): ContractTarget {
  return {
    name,
    async start(options) {
      const opened = await store();
      const service = await createChannelService({
        storage: options.wrapStorage ? options.wrapStorage(opened.storage) : opened.storage,
        flows: demoFlows,
        secretKey: SECRET_KEY,
        logger: quiet,
        livechat: liveChatInbox({ secret: ADMIN_JWT_SECRET }),
        ...serviceOptions,
        plugins: [adminApi({ secret: ADMIN_JWT_SECRET }), ...(serviceOptions?.plugins ?? [])],
        ...(options.maxBodyBytes === undefined ? {} : { maxBodyBytes: options.maxBodyBytes }),
        ...(options.rateLimits === undefined ? {} : { rateLimits: options.rateLimits }),
        ...(options.trustProxy === undefined ? {} : { trustProxy: options.trustProxy }),
      });
      const server = await listen(service);
      return {
        url: server.url,
        admin: service.admin,
        adminJwtSecret: ADMIN_JWT_SECRET,
        storage: opened.storage,
        ...(opened.expireApiKeys ? { expireApiKeys: opened.expireApiKeys } : {}),
        async close() {
          await server.close();
          await service.close();
          await opened.dispose();
        },
      };
    },
  };
}

/**
 * Starts `server` (any node:http server: `http.createServer(app)` for Express, the server of
 * `@hono/node-server`'s `createAdaptorServer`) on 127.0.0.1 with a free port. `close` stops
 * it and ends idle keep-alive connections.
 *
 * @example
 * listen: (service) => listenOnFreePort(http.createServer(toNodeHandler(service)))
 */
export function listenOnFreePort(server: Server): Promise<ListeningServer> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", reject);
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}`,
        close: () =>
          new Promise<void>((done, fail) => {
            server.close((error) => (error ? fail(error) : done()));
            server.closeIdleConnections();
          }),
      });
    });
  });
}
