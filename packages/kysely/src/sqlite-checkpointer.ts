import { Worker } from "node:worker_threads";

/** Commits a storage makes before its checkpointer starts: a storage that writes little never needs one. */
const START_AFTER_COMMITS = 100;
/** How often the checkpointer copies the WAL into the database. */
const INTERVAL_MS = 20;

// The worker's code, evaluated as CommonJS: the package's own files may be bundled by a host
// (esbuild, the bench), where a path to a worker file would not exist.
const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const db = new Database(workerData.path, { fileMustExist: true });
db.pragma("busy_timeout = 0");
const checkpoint = db.prepare("PRAGMA wal_checkpoint(PASSIVE)");
const timer = setInterval(() => {
  try { checkpoint.run(); } catch {}
}, workerData.intervalMs);
parentPort.once("message", () => {
  clearInterval(timer);
  db.close();
  parentPort.close();
});
`;

/** Copies a SQLite database's WAL into its file from a thread of its own. */
export interface WalCheckpointer {
  /** Counts a commit of the storage's connection; the thread starts at the {@link START_AFTER_COMMITS}th. */
  committed(): void;
  /** Stops the thread (when it was started). */
  close(): Promise<void>;
}

/**
 * A checkpointer for the SQLite file at `path`: a worker thread with a connection of its own
 * runs `PRAGMA wal_checkpoint(PASSIVE)` every {@link INTERVAL_MS} ms. SQLite's automatic
 * checkpoint runs inside the `COMMIT` that passes 1,000 WAL pages: it copies them into the
 * database and syncs the file on the event loop, a stall of milliseconds every few hundred
 * runs, and was the larger part of a commit's cost under load (docs/benchmarks.md,
 * "Checkpoints off the event loop"). Here the pages are copied beside the event loop; the
 * automatic checkpoint stays on as a safety net and then finds little or nothing left to
 * copy. A passive checkpoint never waits for a lock and never blocks a writer, so several
 * processes on one file may each run one. `driver` is the module id of better-sqlite3 as the
 * storage resolved it. `:memory:` and temporary databases have no WAL: no thread is started.
 */
export function walCheckpointer(path: string, driver: string): WalCheckpointer {
  const noWal = path === "" || path === ":memory:" || path.startsWith("file::memory:");
  let commits = 0;
  let worker: Worker | undefined;
  let exited: Promise<void> | undefined;
  return {
    committed() {
      if (noWal || worker !== undefined || ++commits < START_AFTER_COMMITS) return;
      worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { path, driver, intervalMs: INTERVAL_MS } });
      worker.unref();
      const started = worker;
      exited = new Promise<void>((done) => started.once("exit", () => done()));
      // A checkpointer that cannot run leaves the automatic checkpoint to do its work.
      worker.on("error", () => undefined);
    },
    async close() {
      if (!worker) return;
      // The thread is unref'd so that it never keeps a process alive; while the storage
      // waits for it to stop, it must, or a process with nothing else to do would exit
      // with this promise unsettled.
      worker.ref();
      worker.postMessage("close");
      await exited;
    },
  };
}
