import {
  type Counter,
  createNoopMeter,
  type Histogram,
  type Meter,
  metrics,
  ProxyTracerProvider,
  type Tracer,
  trace,
  type UpDownCounter,
} from "@opentelemetry/api";

/** The instrumentation scope of channelkit's spans and metrics. */
export const TELEMETRY_SCOPE = "@channelkit/core";

/**
 * The service's tracer and instruments, through `@opentelemetry/api` only: the host brings
 * the SDK and its exporters (as the AI SDK and Mastra ask). Without one, every call is the
 * API's no-op, and a span is made only to find it does not record.
 */
export interface ServiceTelemetry {
  tracer: Tracer;
  /** Whether a meter provider was registered when the service was made: without one, nothing is measured. */
  metered: boolean;
  /** Whether a tracer provider is registered now (one may be, after the service was made). */
  tracing(): boolean;
  /** `http.server.request.duration` (s), by `http.request.method`, `http.route`, `http.response.status_code`. */
  requestDuration: Histogram;
  /** `channelkit.runs`: runs stored, by `channelkit.run.status` and `channelkit.channel.type`. */
  runs: Counter;
  /** `channelkit.run.duration` (s): the flow's run, from its turn to its end. */
  runDuration: Histogram;
  /** `channelkit.run.turn_wait` (s): from a run's arrival to its turn. */
  turnWait: Histogram;
  /** `channelkit.streams.open`: answers that stay open (streamed runs, event streams), in this process. */
  openStreams: UpDownCounter;
  /** `channelkit.rate_limit.refusals`: requests refused `429 rate_limited` or `too_many_streams`, by `error.type`. */
  refusals: Counter;
}

/**
 * The telemetry of a new service. The meter is read from the global provider now, so an SDK
 * registered after `createChannelService` records its spans (the tracer is a proxy) but not
 * its metrics: start the SDK first, as its documentation says.
 */
export function serviceTelemetry(): ServiceTelemetry {
  const meter = metrics.getMeter(TELEMETRY_SCOPE);
  return {
    tracer: trace.getTracer(TELEMETRY_SCOPE),
    metered: meter.constructor !== NOOP_METER,
    tracing,
    requestDuration: meter.createHistogram("http.server.request.duration", { unit: "s", description: "Duration of HTTP server requests." }),
    runs: meter.createCounter("channelkit.runs", { unit: "{run}", description: "Runs of flows, by how they ended." }),
    runDuration: meter.createHistogram("channelkit.run.duration", { unit: "s", description: "Time a flow ran, from its turn to its end." }),
    turnWait: meter.createHistogram("channelkit.run.turn_wait", { unit: "s", description: "Time a run waited for its conversation's turn." }),
    openStreams: meter.createUpDownCounter("channelkit.streams.open", { unit: "{stream}", description: "Answers that stay open, in this process." }),
    refusals: meter.createCounter("channelkit.rate_limit.refusals", {
      unit: "{request}",
      description: "Requests refused by the rate limits or the caps on open streams.",
    }),
  };
}

/** The API's own no-op meter's class: a meter of that class measures nothing. */
const NOOP_METER = createNoopMeter().constructor;

/**
 * Whether spans are recorded: an SDK registered its provider behind the API's proxy. Read on
 * each request, so that a service without an SDK makes no span object at all (the API's
 * no-op span is an allocation per request and per run, measurable on an execute).
 */
function tracing(): boolean {
  const provider = trace.getTracerProvider();
  return !(provider instanceof ProxyTracerProvider) || provider.getDelegateTracer(TELEMETRY_SCOPE) !== undefined;
}

/**
 * The meter of `scope` when an SDK registered a meter provider, else null: code that
 * measures makes its instruments only then, and without an SDK its cost is a null check.
 * Read it once, when what measures is made (as the service's `metered`), after the SDK started.
 */
export function registeredMeter(scope: string = TELEMETRY_SCOPE): Meter | null {
  const meter = metrics.getMeter(scope);
  return meter.constructor === NOOP_METER ? null : meter;
}
