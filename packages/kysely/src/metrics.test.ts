import { type ChannelService, createChannelService, type LiveChatService } from "@channelkit/core";
import { handoverFlow } from "@channelkit/core/demo";
import { describeWithPostgres, postgresTestStore, sqliteTestStore, type TestStore } from "@channelkit/testkit";
import { metrics } from "@opentelemetry/api";
import {
  AggregationTemporality,
  type DataPoint,
  type Histogram,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/**
 * The storages' metrics, read from an SDK registered globally before the store and the
 * service are made, as a host starts its SDK first: the live chats waiting (read from the
 * database at each collection) and the sizes of SQLite's group commits.
 */

let reader: PeriodicExportingMetricReader;
let provider: MeterProvider;

beforeAll(() => {
  // Collected on demand (`reader.collect()`): the interval never comes within a test.
  reader = new PeriodicExportingMetricReader({
    exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE),
    exportIntervalMillis: 3_600_000,
  });
  provider = new MeterProvider({ readers: [reader] });
  metrics.setGlobalMeterProvider(provider);
});
afterAll(async () => {
  metrics.disable();
  await provider.shutdown();
});

/** The data points of the metric `name` collected now; none when it has no point. */
async function pointsOf<T>(name: string): Promise<DataPoint<T>[]> {
  const { resourceMetrics, errors } = await reader.collect();
  expect(errors).toEqual([]);
  const metric = resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics).find((candidate) => candidate.descriptor.name === name);
  return (metric?.dataPoints ?? []) as DataPoint<T>[];
}

function liveChatWaiting(name: string, open: () => Promise<TestStore>): void {
  describe(`channelkit.livechat.waiting: ${name}`, () => {
    let store: TestStore;
    let service: ChannelService | undefined;
    let desk: LiveChatService | undefined;
    const warnings: unknown[][] = [];
    beforeAll(async () => {
      store = await open();
    });
    afterAll(async () => {
      await service?.close();
      await store?.dispose();
    });

    it("counts the handed-over conversations waiting for an agent, from the store; one an agent took is not; nothing is read after close()", async () => {
      service = await createChannelService({
        storage: store.storage,
        flows: [handoverFlow],
        secretKey: "5e".repeat(32),
        logger: { warn: (...args) => warnings.push(args), error: (...args) => warnings.push(args) },
        livechat: {
          id: "desk",
          init(ctx) {
            desk = ctx.livechat;
          },
        },
      });
      const { tenant } = await service.admin.createTenant({ name: "Desk" });
      const { api_key: key } = await service.admin.createChannel({ tenantId: tenant.id, flow: "handover" });
      const handOver = async () => {
        const response = await (service as ChannelService).handler(
          new Request("http://test/public/v1/api/execute", {
            method: "POST",
            headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
            body: JSON.stringify({ payload: "an agent, please" }),
          }),
        );
        const body = (await response.json()) as { conversation_id: string; status: string };
        expect(body.status).toBe("pending");
        return body.conversation_id;
      };
      expect((await pointsOf<number>("channelkit.livechat.waiting")).map((point) => point.value)).toEqual([0]);
      const first = await handOver();
      await handOver();
      expect((await pointsOf<number>("channelkit.livechat.waiting")).map((point) => point.value)).toEqual([2]);
      expect((await desk?.accept(first))?.mode).toBe("livechat_active");
      expect((await pointsOf<number>("channelkit.livechat.waiting")).map((point) => point.value)).toEqual([1]);
      await service.close();
      service = undefined;
      // Closed, with its store, the service reads nothing more: a collection has no error and nothing is logged.
      await pointsOf<number>("channelkit.livechat.waiting");
      expect(warnings).toEqual([]);
    });
  });
}

liveChatWaiting("SQLite", sqliteTestStore);
describeWithPostgres("Postgres", (serverUrl) => liveChatWaiting("Postgres", () => postgresTestStore(serverUrl)));

describe("channelkit.storage.group_commit.batch_size: SQLite", () => {
  let store: TestStore;
  beforeAll(async () => {
    store = await sqliteTestStore();
  });
  afterAll(async () => {
    await store?.storage.close();
    await store?.dispose();
  });

  it("records each commit's transactions: concurrent writes share commits, and the sizes add up to the writes", async () => {
    const before = (await pointsOf<Histogram>("channelkit.storage.group_commit.batch_size"))[0]?.value;
    const writes = 24;
    const tenants = Array.from({ length: writes }, (_, i) => ({ id: crypto.randomUUID(), name: `tenant ${i}`, createdAt: new Date().toISOString() }));
    const counted = await store.storage.countTenants();
    await Promise.all(tenants.map((tenant) => store.storage.createTenant(tenant)));
    expect(await store.storage.countTenants()).toBe(counted + writes);
    const [point, ...others] = await pointsOf<Histogram>("channelkit.storage.group_commit.batch_size");
    expect(others).toEqual([]);
    const count = (point?.value.count ?? 0) - (before?.count ?? 0);
    const sum = (point?.value.sum ?? 0) - (before?.sum ?? 0);
    expect(sum).toBe(writes);
    // The first alone at once (the store was idle), the others together after the turn.
    expect(count).toBeGreaterThanOrEqual(1);
    expect(count).toBeLessThan(writes);
    expect(point?.value.max).toBeGreaterThan(1);
  });
});
