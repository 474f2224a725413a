import { metrics } from "@opentelemetry/api";
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics";
import { afterEach, describe, expect, it } from "vitest";
import { memoryStorage } from "../storage/memory.js";
import type { Storage } from "../storage/types.js";
import { observeLiveChatWaiting } from "./livechat-waiting.js";

/** A memory store that counts its calls of `countLiveChatWaiting`, failing them when told to. */
function countingStore(fail = false): Storage & { reads: number } {
  const inner = memoryStorage();
  const store = {
    ...inner,
    reads: 0,
    async countLiveChatWaiting(query: Parameters<NonNullable<Storage["countLiveChatWaiting"]>>[0]) {
      store.reads++;
      if (fail) throw new Error("the database is away");
      return (await inner.countLiveChatWaiting?.(query)) ?? 0;
    },
  };
  return store;
}

const desk = { id: "desk" };

describe("channelkit.livechat.waiting", () => {
  let provider: MeterProvider | undefined;
  afterEach(async () => {
    metrics.disable();
    await provider?.shutdown();
  });

  /** Registers an SDK whose metrics are collected on demand; returns the collection. */
  function registerSdk() {
    const reader = new PeriodicExportingMetricReader({
      exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE),
      exportIntervalMillis: 3_600_000,
    });
    provider = new MeterProvider({ readers: [reader] });
    metrics.setGlobalMeterProvider(provider);
    return async () => {
      const { resourceMetrics, errors } = await reader.collect();
      const metric = resourceMetrics.scopeMetrics
        .flatMap((scope) => scope.metrics)
        .find((candidate) => candidate.descriptor.name === "channelkit.livechat.waiting");
      return { errors, values: (metric?.dataPoints ?? []).map((point) => point.value) };
    };
  }

  const logger = () => {
    const warnings: unknown[][] = [];
    return { warnings, warn: (...args: unknown[]) => void warnings.push(args), error: (...args: unknown[]) => void warnings.push(args) };
  };

  it("without an SDK when made, without a live chat or without the store's count, there is no gauge and the store is never read", async () => {
    const before = countingStore();
    observeLiveChatWaiting(before, desk, logger());
    const collect = registerSdk();
    const withoutLiveChat = countingStore();
    observeLiveChatWaiting(withoutLiveChat, null, logger());
    const { countLiveChatWaiting: _, ...withoutCount } = memoryStorage();
    observeLiveChatWaiting(withoutCount, desk, logger());
    expect(await collect()).toEqual({ errors: [], values: [] });
    expect(before.reads + withoutLiveChat.reads).toBe(0);
  });

  it("reads the count at each collection, and no more once stopped", async () => {
    const collect = registerSdk();
    const store = countingStore();
    const stop = observeLiveChatWaiting(store, desk, logger());
    expect(await collect()).toEqual({ errors: [], values: [0] });
    await collect();
    expect(store.reads).toBe(2);
    stop();
    await collect();
    expect(store.reads).toBe(2);
  });

  it("a store that fails is logged once, whatever the collections, and no collection fails", async () => {
    const collect = registerSdk();
    const store = countingStore(true);
    const log = logger();
    observeLiveChatWaiting(store, desk, log);
    for (let i = 0; i < 3; i++) expect((await collect()).errors).toEqual([]);
    expect(store.reads).toBe(3);
    expect(log.warnings).toHaveLength(1);
    expect(String(log.warnings[0]?.[0])).toContain("channelkit.livechat.waiting");
    expect(log.warnings[0]?.[1]).toMatchObject({ message: "the database is away" });
  });
});
