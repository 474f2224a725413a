import type { ChannelAdmin, ChannelServiceOptions, Storage } from "@channelkit/core";

/** Options the suite starts a target with. */
export interface ContractTargetOptions {
  /**
   * Largest request body the service accepts, in bytes (the service's `maxBodyBytes`).
   * `undefined` means the service default (1 MiB).
   */
  maxBodyBytes?: number;
  /** The service's `rateLimits` (default: the service's defaults). */
  rateLimits?: ChannelServiceOptions["rateLimits"];
  /** The service's `trustProxy` (default: none). */
  trustProxy?: ChannelServiceOptions["trustProxy"];
  /**
   * Wraps the storage the service is given (not the one the suite reads back from), so that
   * a test can hold the service at a point of a request (see `StorageGate`). A target that
   * cannot wrap its service's storage (another runtime's) omits the groups that need it.
   */
  wrapStorage?: (storage: Storage) => Storage;
}

/** A channel service listening on a real HTTP socket, as started by {@link ContractTarget.start}. */
export interface RunningTarget {
  /**
   * Where the routes are served, without a trailing slash: the server's origin, e.g.
   * `http://127.0.0.1:43817`, plus the prefix when the adapter mounts them under one, e.g.
   * `http://127.0.0.1:43817/chat`. The suite appends the contract's paths to it.
   */
  url: string;
  /** The service's admin API: the suite provisions tenants and channels with it. */
  admin: ChannelAdmin;
  /** The HS256 secret its admin routes (`adminApi`) verify tokens with: the suite signs its own. */
  adminJwtSecret: string;
  /** The service's storage: the suite only reads stored runs back from it (`findRun`). */
  storage: Storage;
  /**
   * Optional: marks every API key of the channel as expired. The admin API cannot set an
   * expiry, so a target that can reach its database directly may offer this; the expired
   * key test is skipped without it.
   */
  expireApiKeys?(channelId: string): Promise<void>;
  /** Stops the HTTP server, then the service (and its storage). */
  close(): Promise<void>;
}

/**
 * One way to run channelkit that the contract suite is pointed at: an adapter (node:http,
 * express, ...) on a storage (SQLite, Postgres, ...).
 */
export interface ContractTarget {
  /** Shown in the test names, e.g. `node:http + SQLite`. */
  name: string;
  /**
   * Starts a fresh service (empty, migrated database; the demo flows registered) behind a
   * real HTTP server listening on 127.0.0.1 with a free port.
   */
  start(options: ContractTargetOptions): Promise<RunningTarget>;
}
