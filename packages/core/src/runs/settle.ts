import type { NewMessage, RunConversation, RunRecord, Storage } from "../storage/types.js";
import type { RunLifecycle } from "./lifecycle.js";
import { isoTimestamp } from "./timestamp.js";

/**
 * What a run whose storage failed is stored with once the storage answers again: its client
 * was answered with an error (a `500 runtime_error`, or a stream's `error` event), and history
 * says so rather than showing a user message without an answer or a run left `running`.
 */
export const STORAGE_FAILED_ERROR = "The service could not store this run: its storage failed while it ran. Its client was answered with an error.";

/** A run whose storage failed after it took its ticket. */
export interface FailedRun {
  storage: Storage;
  lifecycle: RunLifecycle;
  /** Its record as it started (status `running`): stored as an `error`. */
  run: RunRecord;
  conversation: RunConversation;
  ticket: number;
  /** Whether the run is known to hold its turn (its claim was stored and answered). */
  claimed: boolean;
  /** Its user message, stored with it when its turn was never claimed. */
  userMessage: NewMessage;
  /** A recorded run has its row from its ticket on, claimed or not. */
  recorded: boolean;
}

/** Waits between two tries, in ms: soon after a short outage, at most a second apart. */
const RETRY_MS = [50, 100, 200, 400, 800, 1000];

/**
 * Gives a failed run's ticket, and its turn when it held it, back to its conversation as soon
 * as the storage answers again: the run is stored `error` ({@link STORAGE_FAILED_ERROR}), with
 * its user message when its turn was never claimed, and the turn passes on. Without this, the
 * conversation's next run would wait for the failed run's lease to lapse (`turnLeaseMs`, 30 s
 * by default), one lease per failed run. It tries for one lease at most, in the background;
 * past it, or once the service closes, the lease takes the turn over as it does for an
 * instance that stopped. A run already stored (its outcome reached the database though its
 * answer did not, or the next run took its lapsed turn over) is left as it is.
 */
export function settleFailedRun(failed: FailedRun): void {
  const { lifecycle } = failed;
  // Admitted as a run of its own: `close()` waits for it, and its abort ends the tries.
  const abort = lifecycle.admit();
  const until = Date.now() + lifecycle.leaseMs;
  void (async () => {
    for (let attempt = 0; !abort.aborted && Date.now() < until; attempt++) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, RETRY_MS[Math.min(attempt, RETRY_MS.length - 1)]);
        abort.onAbort(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      if (abort.aborted) break;
      try {
        if (await store(failed)) lifecycle.turnPassed(failed.conversation.id);
        return;
      } catch {
        // The storage is still out of reach: try again.
      }
    }
    lifecycle.logger.warn(`channelkit: run ${failed.run.id} could not be stored; its conversation's next run takes its turn over once its lease lapses`);
  })().finally(() => lifecycle.release(abort));
}

/** Stores the failed run unless it is stored already; whether it stored it. */
async function store(failed: FailedRun): Promise<boolean> {
  const { storage, run } = failed;
  const found = await storage.findRun(run.id);
  if (found && found.status !== "running") return false;
  // A run that is not recorded has a `running` row only once its turn is claimed (Postgres
  // writes it with the claim): a claim whose answer was lost is found so.
  const claimed = failed.claimed || (found !== null && !failed.recorded);
  const nowMs = Date.now();
  const startedMs = Date.parse(run.startedAt);
  await storage.completeRun({
    run: { ...run, status: "error", error: STORAGE_FAILED_ERROR, completedAt: isoTimestamp(nowMs), durationMs: Math.max(0, nowMs - startedMs) },
    conversation: failed.conversation,
    ticket: failed.ticket,
    claimed,
    messages: claimed ? [] : [failed.userMessage],
    claimUntil: isoTimestamp(nowMs + failed.lifecycle.claimMs),
  });
  return true;
}
