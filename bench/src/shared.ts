/** What the orchestrator and the server processes agree on. */

/** The master key both servers use, so the baseline can open the same sealed signing secrets. */
export const BENCH_SECRET_KEY = "be".repeat(32);

/**
 * The servers measured against each other: the bench's hand-written baseline (every check of
 * the contract), the lean baseline (the afternoon handler, execute only), channelkit as the
 * bench embeds it (`@channelkit/node`'s serve on the sources), and `channelkit serve`, the
 * built CLI as users run it (every plugin it mounts, the reliability defaults on); and `base`,
 * the same embedding on the sources of another checkout (`--base DIR`), to compare a change
 * with the tree before it in one run.
 */
export type ServerKind = "baseline" | "lean" | "channelkit" | "serve" | "base";
export const SERVER_KINDS: readonly ServerKind[] = ["baseline", "lean", "channelkit", "serve", "base"];
/** The servers forked from the bench's own bundle, with an IPC channel. */
export type ForkedKind = Exclude<ServerKind, "serve">;
/**
 * A side of a measurement: a server, or `reference` for a scenario channelkit is measured
 * against itself on (the reference requests, on the channelkit server).
 */
export type Side = ServerKind | "reference";
/** The ratios reported, `a/b` = a ÷ b, each the median of the per-round ratios. */
export const COMPARISONS = [
  "channelkit/baseline",
  "channelkit/lean",
  "serve/baseline",
  "serve/lean",
  "channelkit/reference",
  "channelkit/base",
  "base/lean",
] as const;
export type Comparison = (typeof COMPARISONS)[number];
/** The two stores. */
export type StoreKind = "sqlite" | "postgres";

/** How a server process is started: passed as JSON in `BENCH_SERVER_CONFIG`. */
export interface ServerConfig {
  kind: ForkedKind;
  store: StoreKind;
  /** SQLite file path or `postgres://` URL of the seeded database. */
  location: string;
  /** Time each SQLite transaction's wait for the write lock (`--instances`). */
  countLockWaits?: boolean;
}

/** Messages from a server process to the orchestrator. */
export type ServerMessage =
  | { type: "ready"; port: number }
  | { type: "memory"; id: number; usage: MemorySample }
  | { type: "cpu"; id: number; usage: NodeJS.CpuUsage }
  | { type: "locks"; id: number; usage: LockWaits }
  | { type: "stopped" };

/** Messages from the orchestrator to a server process. */
export type OrchestratorMessage = { type: "memory"; id: number } | { type: "cpu"; id: number } | { type: "locks"; id: number } | { type: "stop" };

/**
 * How often a server met another process's SQLite write lock so far: each transaction's
 * `BEGIN IMMEDIATE` timed and counted (bench/src/lock-waits.ts).
 */
export interface LockWaits {
  begins: number;
  /** `BEGIN IMMEDIATE`s that blocked the process 1 ms or more (SQLite's busy handler sleeps at least that long). */
  waits: number;
  /** How long those blocked the process. */
  waitedMs: number;
  /** `BEGIN IMMEDIATE`s answered `SQLITE_BUSY` at once (the group commit then tries again without blocking). */
  busy: number;
}

/** What a server counted of its lock waits (zeros when it does not count them). */
export const lockWaits: LockWaits = { begins: 0, waits: 0, waitedMs: 0, busy: 0 };

/** `process.memoryUsage()` after a full garbage collection. */
export interface MemorySample {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
}

/** Sends a message to the parent process (servers are forked with an IPC channel). */
export function toParent(message: ServerMessage): void {
  process.send?.(message);
}

/** A memory sample taken after a full collection (servers run with `--expose-gc`). */
export function sampleMemory(): MemorySample {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc) {
    gc();
    gc();
  }
  const { rss, heapUsed, heapTotal, external, arrayBuffers } = process.memoryUsage();
  return { rss, heapUsed, heapTotal, external, arrayBuffers };
}

/** Reads `BENCH_SERVER_CONFIG`. */
export function serverConfig(): ServerConfig {
  const raw = process.env.BENCH_SERVER_CONFIG;
  if (!raw) throw new Error("BENCH_SERVER_CONFIG is not set: servers are started by bench/bench.mjs");
  return JSON.parse(raw) as ServerConfig;
}

/** Answers the orchestrator's memory and stop requests. */
export function listenToParent(stop: () => Promise<void>): void {
  process.on("message", (message: OrchestratorMessage) => {
    if (message.type === "memory") {
      toParent({ type: "memory", id: message.id, usage: sampleMemory() });
    } else if (message.type === "cpu") {
      toParent({ type: "cpu", id: message.id, usage: process.cpuUsage() });
    } else if (message.type === "locks") {
      toParent({ type: "locks", id: message.id, usage: { ...lockWaits } });
    } else if (message.type === "stop") {
      void stop().finally(() => {
        toParent({ type: "stopped" });
        // `process.exit` still writes a --cpu-prof profile.
        setTimeout(() => process.exit(0), 50);
      });
    }
  });
  process.on("disconnect", () => process.exit(0));
}

/** The floor server's variants: plain node:http, a Web handler behind toNodeHandler, a Reply through dispatch. */
export type FloorVariant = "plain" | "web" | "reply";
