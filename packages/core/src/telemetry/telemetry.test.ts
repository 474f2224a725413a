import { metrics, trace } from "@opentelemetry/api";
import { MeterProvider } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider } from "@opentelemetry/sdk-trace-base";
import { afterEach, describe, expect, it } from "vitest";
import { serviceTelemetry } from "./telemetry.js";

describe("serviceTelemetry", () => {
  afterEach(() => {
    trace.disable();
    metrics.disable();
  });

  it("without an SDK, neither traces nor measures: requests and runs make no telemetry object", () => {
    const telemetry = serviceTelemetry();
    expect(telemetry.metered).toBe(false);
    expect(telemetry.tracing()).toBe(false);
  });

  it("traces once a tracer provider is registered, even after the service was made; measures with a meter provider registered before", () => {
    const before = serviceTelemetry();
    trace.setGlobalTracerProvider(new BasicTracerProvider());
    metrics.setGlobalMeterProvider(new MeterProvider());
    expect(before.tracing()).toBe(true);
    // The meter is taken when the service is made: docs/operations.md says to start the SDK first.
    expect(before.metered).toBe(false);
    expect(serviceTelemetry().metered).toBe(true);
    trace.disable();
    expect(before.tracing()).toBe(false);
  });
});
