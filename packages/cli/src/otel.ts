/**
 * `serve --otel`: an OpenTelemetry SDK in the command's process, so that the spans and metrics
 * `@channelkit/core` reports through `@opentelemetry/api` are exported over OTLP/HTTP. Loaded
 * with a dynamic import by `serve`, and only with `--otel`: without it the SDK is never read.
 *
 * Configured by the standard variables: the exporters read `OTEL_EXPORTER_OTLP_*` themselves
 * (endpoint, per-signal endpoints, headers, timeout, compression), the tracer provider reads
 * `OTEL_TRACES_SAMPLER` and the span limits, the batch processor `OTEL_BSP_*`, the resource
 * `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`; this file reads `OTEL_SDK_DISABLED`,
 * `OTEL_LOG_LEVEL`, `OTEL_METRIC_EXPORT_INTERVAL` and `OTEL_METRIC_EXPORT_TIMEOUT`.
 */
import { context, DiagLogLevel, diag, metrics, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { OTLPMetricExporter } from "@opentelemetry/exporter-metrics-otlp-http";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { defaultResource, detectResources, envDetector, hostDetector, resourceFromAttributes } from "@opentelemetry/resources";
import { MeterProvider, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { logLine } from "./errors.js";
import type { Io } from "./host.js";

/** The SDK `serve --otel` started. */
export interface Otel {
  /** Exports what is still buffered (the last spans, a last collection of the metrics) and stops: at most `timeoutMs`. */
  shutdown(timeoutMs: number): Promise<void>;
}

/** `OTEL_SERVICE_NAME`'s default. */
const SERVICE_NAME = "channelkit";

/** A whole number of milliseconds from `name`, else `fallback` (a bad value is warned about). */
function millis(env: NodeJS.ProcessEnv, name: string, fallback: number, io: Io): number {
  const raw = env[name]?.trim();
  if (raw === undefined || raw === "") return fallback;
  if (/^\d{1,9}$/.test(raw) && Number(raw) > 0) return Number(raw);
  io.err(logLine(`WARNING: ${name}=${raw} is not a number of milliseconds: ${fallback} is used`));
  return fallback;
}

/** `OTEL_LOG_LEVEL` as the SDK's diagnostic level: warnings by default (an exporter that cannot reach its collector says so). */
function logLevel(env: NodeJS.ProcessEnv): DiagLogLevel {
  const level = env.OTEL_LOG_LEVEL?.trim().toUpperCase();
  const levels: Record<string, DiagLogLevel> = {
    NONE: DiagLogLevel.NONE,
    ERROR: DiagLogLevel.ERROR,
    WARN: DiagLogLevel.WARN,
    INFO: DiagLogLevel.INFO,
    DEBUG: DiagLogLevel.DEBUG,
    VERBOSE: DiagLogLevel.VERBOSE,
    ALL: DiagLogLevel.ALL,
  };
  return (level ? levels[level] : undefined) ?? DiagLogLevel.WARN;
}

/**
 * Starts the SDK and registers it globally (tracer provider, meter provider, an
 * AsyncLocalStorage context manager, so a run's spans nest under its request's), or returns
 * null when `OTEL_SDK_DISABLED=true`. Call it before the service is made: the service takes
 * its meter when it is created.
 */
export function startOtel(io: Io): Otel | null {
  const env = io.env;
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") {
    io.out("--otel: OTEL_SDK_DISABLED=true, no OpenTelemetry SDK started");
    return null;
  }
  const write = (message: string, args: unknown[]) => io.err(logLine(`OpenTelemetry: ${[message, ...args.map(String)].join(" ")}`));
  diag.setLogger(
    {
      error: (message, ...args) => write(message, args),
      warn: (message, ...args) => write(message, args),
      info: (message, ...args) => write(message, args),
      debug: (message, ...args) => write(message, args),
      verbose: (message, ...args) => write(message, args),
    },
    { logLevel: logLevel(env), suppressOverrideMessage: true },
  );

  // The SDK's defaults (telemetry.sdk.*), then service.name channelkit, then the host, then
  // OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME, which win. Not the process detector: its
  // command line would carry --db, which may hold a Postgres password.
  const resource = defaultResource()
    .merge(resourceFromAttributes({ "service.name": SERVICE_NAME }))
    .merge(detectResources({ detectors: [hostDetector, envDetector] }));

  const tracerProvider = new BasicTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())] });
  const exportIntervalMillis = millis(env, "OTEL_METRIC_EXPORT_INTERVAL", 60_000, io);
  // The reader refuses a timeout longer than its interval.
  const exportTimeoutMillis = Math.min(millis(env, "OTEL_METRIC_EXPORT_TIMEOUT", 30_000, io), exportIntervalMillis);
  const meterProvider = new MeterProvider({
    resource,
    readers: [new PeriodicExportingMetricReader({ exporter: new OTLPMetricExporter(), exportIntervalMillis, exportTimeoutMillis })],
  });

  const contextManager = new AsyncLocalStorageContextManager().enable();
  const registered = [
    context.setGlobalContextManager(contextManager),
    trace.setGlobalTracerProvider(tracerProvider),
    metrics.setGlobalMeterProvider(meterProvider),
  ];
  if (registered.includes(false)) {
    io.err(logLine("WARNING: --otel: an OpenTelemetry SDK was already registered in this process; the one of --otel may export nothing"));
  }

  return {
    async shutdown(timeoutMs) {
      let timer: NodeJS.Timeout | undefined;
      const done = Promise.allSettled([tracerProvider.shutdown(), meterProvider.shutdown()]).then((results) => {
        for (const result of results) {
          if (result.status === "rejected") io.err(logLine(`WARNING: --otel: exporting the last telemetry failed: ${String(result.reason)}`));
        }
      });
      const late = new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          io.err(logLine(`WARNING: --otel: the last telemetry was not exported within ${timeoutMs} ms: stopped without it`));
          resolve();
        }, timeoutMs);
      });
      try {
        await Promise.race([done, late]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
