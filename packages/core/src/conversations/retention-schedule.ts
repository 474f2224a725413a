import type { ServiceContext } from "../context.js";
import { isServiceError } from "../http/errors.js";
import { RETENTION_STORE, retainedChannels, sweepRetention } from "./retention.js";

/** Options of the periodic retention sweep (`createChannelService({ retention })`). */
export interface RetentionOptions {
  /**
   * How often a sweep runs, across all instances on the database together, in ms (default
   * 3600000, an hour; at least 1000). Every instance wakes once per period; the first to claim
   * the period sweeps, the others skip it.
   */
  intervalMs?: number;
}

/**
 * Runs the retention sweep once per period across every instance on the database: each
 * instance wakes every `intervalMs`, and the one that adds the period's key to the shared
 * store first sweeps it. Nothing is written while no channel has a `retention_days`.
 */
export class RetentionSchedule {
  readonly #ctx: ServiceContext;
  readonly #intervalMs: number;
  readonly #holder = crypto.randomUUID();
  #timer: ReturnType<typeof setInterval> | undefined;
  #running: Promise<void> | undefined;
  #closed = false;

  constructor(ctx: ServiceContext, intervalMs: number) {
    this.#ctx = ctx;
    this.#intervalMs = intervalMs;
  }

  start(): void {
    this.#timer = setInterval(() => this.#tick(), this.#intervalMs);
    // The sweep never keeps a process alive on its own.
    (this.#timer as { unref?: () => void }).unref?.();
  }

  /** Stops waking, and waits for a sweep in progress to end its batch. */
  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#timer);
    await this.#running;
  }

  #tick(): void {
    if (this.#running || this.#closed) return;
    this.#running = this.#sweepOnce()
      .catch((error) => {
        // Another instance still sweeping an earlier period: this one's turn passes.
        if (isServiceError(error) && error.code === "sweep_in_progress") return;
        this.#ctx.logger.error("channelkit: the retention sweep failed; the next period's sweep tries again", error);
      })
      .finally(() => {
        this.#running = undefined;
      });
  }

  async #sweepOnce(): Promise<void> {
    const { storage } = this.#ctx;
    const channels = retainedChannels(await storage.listChannels());
    if (channels.length === 0) return;
    const period = Math.floor(Date.now() / this.#intervalMs);
    const claimed = await storage.pluginStore(RETENTION_STORE).add(`period:${this.#intervalMs}:${period}`, this.#holder, { ttlMs: 2 * this.#intervalMs });
    if (!claimed || this.#closed) return;
    await sweepRetention(this.#ctx, this.#holder, { channels, stopped: () => this.#closed });
  }
}
