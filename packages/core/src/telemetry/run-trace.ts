import { type Attributes, type Context, context, type Span, SpanStatusCode, type Tracer, trace } from "@opentelemetry/api";
import type { ServiceTelemetry } from "./telemetry.js";

/** Who a run is: what its span says of it (ids and names only, never a payload or a key). */
export interface RunIdentity {
  runId: string;
  conversationId: string;
  channelId: string;
  channelType: string;
  tenantId: string;
  flowName: string;
}

/** How a run ended, as its span and metrics tell it. */
export interface RunEnding {
  /** `success`, `error`, `pending`, `cancelled`; `failed` when it could not be stored. */
  status: string;
  /** From the run's arrival to its turn, in ms. */
  turnWaitMs: number;
  /** From its turn to its end, in ms. */
  durationMs: number;
}

/**
 * The span of one run, `invoke_agent {flow}` (OpenTelemetry's GenAI conventions for an
 * agent's invocation), child of the request that started it, with a child span per step of
 * the flow and per storage transaction of the run. The flow runs inside it, so the spans
 * of what it calls (the AI SDK's `streamText` with telemetry on) nest under it. Made only
 * when the span records: without an SDK a run carries none.
 */
export class RunTrace {
  readonly #tracer: Tracer;
  readonly #span: Span;
  readonly #context: Context;
  #step: Span | null = null;

  private constructor(tracer: Tracer, span: Span) {
    this.#tracer = tracer;
    this.#span = span;
    this.#context = trace.setSpan(context.active(), span);
  }

  /** The trace of a run starting now; null when no SDK records it. */
  static start(telemetry: ServiceTelemetry, run: RunIdentity): RunTrace | null {
    if (!telemetry.tracing()) return null;
    const span = telemetry.tracer.startSpan(`invoke_agent ${run.flowName}`, {
      attributes: {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": run.flowName,
        "gen_ai.conversation.id": run.conversationId,
        "channelkit.run.id": run.runId,
        "channelkit.conversation.id": run.conversationId,
        "channelkit.channel.id": run.channelId,
        "channelkit.channel.type": run.channelType,
        "channelkit.tenant.id": run.tenantId,
        "channelkit.flow.name": run.flowName,
      },
    });
    return span.isRecording() ? new RunTrace(telemetry.tracer, span) : null;
  }

  /** Calls `body` with the run's span active: what it starts (the flow's next step) is the run's. */
  within<T>(body: () => T): T {
    return context.with(this.#context, body);
  }

  /** The flow starts a step: the step before it ends. */
  step(name: string, nodeType: string): void {
    this.#step?.end();
    this.#step = this.#tracer.startSpan(`step ${name}`, { attributes: { "channelkit.step.name": name, "channelkit.step.node_type": nodeType } }, this.#context);
  }

  /** `transaction`, in a span of its own: one of the run's storage transactions. */
  async storage<T>(operation: string, transaction: () => Promise<T>): Promise<T> {
    const span = this.#tracer.startSpan(`channelkit.storage ${operation}`, { attributes: { "db.operation.name": operation } }, this.#context);
    try {
      return await transaction();
    } catch (error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: errorName(error) });
      throw error;
    } finally {
      span.end();
    }
  }

  /** The run is over: its last step and its span end, with its status and times. */
  end(ending: RunEnding): void {
    this.#step?.end();
    this.#step = null;
    const attributes: Attributes = {
      "channelkit.run.status": ending.status,
      "channelkit.run.turn_wait_ms": ending.turnWaitMs,
      "channelkit.run.duration_ms": ending.durationMs,
    };
    this.#span.setAttributes(attributes);
    // The flow's own error message stays in the run's record: it may quote what the user wrote.
    if (ending.status === "error" || ending.status === "failed") this.#span.setStatus({ code: SpanStatusCode.ERROR, message: `run ${ending.status}` });
    this.#span.end();
  }
}

/** An error's class name, never its message (which may hold a connection string or a payload). */
function errorName(error: unknown): string {
  return error instanceof Error ? error.name : typeof error;
}

/** Counts a run that ended in the service's metrics. */
export function recordRun(telemetry: ServiceTelemetry, channelType: string, ending: RunEnding): void {
  if (!telemetry.metered) return;
  const attributes = { "channelkit.run.status": ending.status, "channelkit.channel.type": channelType };
  telemetry.runs.add(1, attributes);
  telemetry.runDuration.record(ending.durationMs / 1000, attributes);
  telemetry.turnWait.record(ending.turnWaitMs / 1000, { "channelkit.channel.type": channelType });
}
