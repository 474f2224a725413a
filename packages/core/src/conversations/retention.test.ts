import { metrics } from "@opentelemetry/api";
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics";
import { describe, expect, it } from "vitest";
import { demoFlows } from "../flows/demo.js";
import { createChannelService, definePlugin, liveChatInbox, memoryStorage, type ServiceContext, type Storage } from "../index.js";
import { RETENTION_STORE, sweepRetention } from "./retention.js";

const DAY_MS = 86_400_000;

async function service(storage: Storage = memoryStorage()) {
  let context: ServiceContext | undefined;
  const probe = definePlugin({
    id: "probe",
    init(ctx) {
      context = ctx;
    },
  });
  const s = await createChannelService({
    storage,
    flows: demoFlows,
    livechat: liveChatInbox({ development: true }),
    plugins: [probe],
    retention: false,
    logger: { warn() {}, error() {} },
  });
  return Object.assign(s, { ctx: () => context as ServiceContext, storage });
}

type Service = Awaited<ReturnType<typeof service>>;

/** A conversation made by one execute; its id. */
async function converse(s: Service, key: string, payload = "hello"): Promise<string> {
  const response = await s.handler(
    new Request("http://localhost/public/v1/api/execute", {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ payload, stream: false }),
    }),
  );
  expect(response.status).toBe(200);
  return ((await response.json()) as { conversation_id: string }).conversation_id;
}

async function channel(s: Service, tenantId: string, flow: string, retentionDays: number | null) {
  const created = await s.admin.createChannel({ tenantId, flow, retentionDays });
  expect(created.channel.retention_days).toBe(retentionDays);
  return created;
}

describe("the retention sweep", () => {
  it("deletes a channel's conversations that ended more than retention_days ago, keeps live chats and channels without one, and audits each batch", async () => {
    const s = await service();
    const { tenant } = await s.admin.createTenant({ name: "Acme" });
    const kept30 = await channel(s, tenant.id, "echo", 30);
    const forever = await channel(s, tenant.id, "echo", null);
    const handed = await channel(s, tenant.id, "handover", 30);
    const ended = [await converse(s, kept30.api_key), await converse(s, kept30.api_key)];
    const keptForever = await converse(s, forever.api_key);
    const waiting = await converse(s, handed.api_key);
    expect((await s.storage.findConversation(waiting))?.mode).toBe("livechat_waiting");

    // Twenty-nine days on, nothing has ended long enough.
    expect(await sweepRetention(s.ctx(), "a", { now: Date.now() + 29 * DAY_MS })).toEqual({ channels: 2, conversations: 0, messages: 0, runs: 0 });
    const swept = await sweepRetention(s.ctx(), "a", { now: Date.now() + 31 * DAY_MS });
    expect(swept).toEqual({ channels: 2, conversations: 2, messages: 4, runs: 2 });
    for (const id of ended) expect(await s.storage.findConversation(id)).toBeNull();
    expect(await s.storage.findConversation(keptForever)).not.toBeNull();
    expect(await s.storage.findConversation(waiting)).not.toBeNull();

    const events = (await s.admin.audit({ tenantId: tenant.id })).events.filter((event) => event.operation === "retention_sweep");
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      channel_id: kept30.channel.id,
      actor: "retention",
      via: "service",
      outcome: "success",
      changes: { retention_days: { from: 30, to: 30 }, conversations: { from: 2, to: 0 }, messages: { from: 4, to: 0 }, runs: { from: 2, to: 0 } },
    });
  });

  it("counts what it deleted in channelkit.retention.deleted, when an SDK is registered", async () => {
    const reader = new PeriodicExportingMetricReader({
      exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE),
      exportIntervalMillis: 3_600_000,
    });
    const provider = new MeterProvider({ readers: [reader] });
    metrics.setGlobalMeterProvider(provider);
    try {
      const s = await service();
      const { tenant } = await s.admin.createTenant({ name: "Acme" });
      const created = await channel(s, tenant.id, "echo", 1);
      await converse(s, created.api_key);
      await converse(s, created.api_key);
      expect((await sweepRetention(s.ctx(), "a", { now: Date.now() + 2 * DAY_MS })).conversations).toBe(2);
      const { resourceMetrics } = await reader.collect();
      const deleted = resourceMetrics.scopeMetrics
        .flatMap((scope) => scope.metrics)
        .find((metric) => metric.descriptor.name === "channelkit.retention.deleted");
      expect(deleted?.dataPoints.map((point) => point.value)).toEqual([2]);
    } finally {
      metrics.disable();
      await provider.shutdown();
    }
  });

  it("one sweep at a time across instances: another holder of the lease is sweep_in_progress", async () => {
    const s = await service();
    await s.storage.pluginStore(RETENTION_STORE).acquireLease("sweep", "another instance", 60_000);
    await expect(sweepRetention(s.ctx(), "this instance")).rejects.toMatchObject({ code: "sweep_in_progress" });
    await expect(s.admin.sweepRetention()).rejects.toMatchObject({ code: "sweep_in_progress" });
    await s.storage.pluginStore(RETENTION_STORE).releaseLease("sweep", "another instance");
    expect(await s.admin.sweepRetention()).toEqual({ channels: 0, conversations: 0, messages: 0, runs: 0 });
  });

  it("retention_days is checked: 1 to 36500 whole days, or null", async () => {
    const s = await service();
    const { tenant } = await s.admin.createTenant({ name: "Acme" });
    for (const retentionDays of [0, 36_501, 1.5, "30"]) {
      await expect(s.admin.createChannel({ tenantId: tenant.id, flow: "echo", retentionDays: retentionDays as number })).rejects.toMatchObject({
        code: "validation_error",
      });
    }
    const created = await channel(s, tenant.id, "echo", 7);
    expect((await s.admin.updateChannel(created.channel.id, { retentionDays: null })).channel.retention_days).toBeNull();
    expect((await s.admin.updateChannel(created.channel.id, { retentionDays: 90 })).channel.retention_days).toBe(90);
  });

  it("refuses a retention.intervalMs under a second", async () => {
    await expect(
      createChannelService({ storage: memoryStorage(), flows: demoFlows, retention: { intervalMs: 10 }, logger: { warn() {}, error() {} } }),
    ).rejects.toThrow("retention.intervalMs is a whole number of milliseconds, 1000 or more, not 10");
  });
});
