import type { RunFlowInput, Runs, ServiceInternals } from "../context.js";
import { startOnExternalKey } from "./external-key.js";
import { type StartRunInput, startRun } from "./start.js";

/** The runs as a route sees them (`ctx.runs`): starting one, and holding the service open; the lifecycle stays the service's. */
export function runsOf(ctx: ServiceInternals): Runs {
  const lifecycle = ctx.lifecycle;
  return {
    // One implementation of both overloads: a run without `flowEvents` never hands out a flow event.
    start: ((input: RunFlowInput) => {
      const { conversation } = input;
      if (conversation !== null && "externalKey" in conversation) return startOnExternalKey(ctx, { ...input, conversation: null }, conversation.externalKey);
      return startRun(ctx, input as StartRunInput);
    }) as Runs["start"],
    hold() {
      const abort = lifecycle.admit();
      return () => lifecycle.release(abort);
    },
    cancel: (runId, reason = new DOMException("The run was cancelled.", "AbortError")) => lifecycle.cancel(runId, reason),
    get closed() {
      return lifecycle.closed;
    },
    leaseMs: lifecycle.leaseMs,
  };
}
