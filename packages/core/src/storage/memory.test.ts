import { storageContract } from "@channelkit/testkit/storage";
import { describe, expect, it } from "vitest";
import { memoryStorage } from "./memory.js";
import type { ChannelRecord } from "./types.js";

storageContract("memory", async () => memoryStorage());

const NOW = "2025-01-01T00:00:00.000Z";

function channel(tenantId: string): ChannelRecord {
  return {
    id: crypto.randomUUID(),
    tenantId,
    name: null,
    type: "api",
    mode: "server",
    environment: "prod",
    state: "active",
    flowName: "echo",
    allowedOrigins: [],
    defaultStream: true,
    requireSignature: false,
    signingSecretEncrypted: null,
    apiKeyHint: null,
    clientId: null,
    languages: [],
    livechatMessages: {},
    livechatWaitTimeoutSeconds: null,
    runTimeoutSeconds: null,
    resumableStreams: false,
    rateLimits: null,
    widget: {},
    settings: {},
    sealedSettings: null,
    createdAt: NOW,
    updatedAt: NOW,
  };
}

function key(channelId: string, tenantId: string, hash = `hash-${crypto.randomUUID()}`) {
  return {
    id: crypto.randomUUID(),
    channelId,
    tenantId,
    hash,
    prefix: "svc_live_",
    environment: "prod" as const,
    hint: "svc_live_****",
    createdAt: NOW,
    expiresAt: null,
    revokedAt: null,
  };
}

describe("memoryStorage", () => {
  it("keeps each storage's data to itself", async () => {
    const one = memoryStorage();
    const two = memoryStorage();
    await one.createTenant({ id: "t", name: "One", createdAt: NOW });
    expect(await one.countTenants()).toBe(1);
    expect(await two.countTenants()).toBe(0);
    expect(await two.findTenant("t")).toBeNull();
  });

  it("refuses what the SQL schema refuses: a channel of an unknown tenant, a key of an unknown channel, a second client id", async () => {
    const storage = memoryStorage();
    const orphan = channel("no-such-tenant");
    await expect(storage.createChannel(orphan, key(orphan.id, orphan.tenantId))).rejects.toThrow(/tenant/);
    expect(await storage.findChannel(orphan.id)).toBeNull();

    await storage.createTenant({ id: "t", name: "T", createdAt: NOW });
    const first = { ...channel("t"), clientId: "client" };
    const firstKey = key(first.id, "t");
    await storage.createChannel(first, firstKey);
    const stray = key("no-such-channel", "t");
    await expect(storage.replaceChannelKey(first.id, stray, NOW)).rejects.toThrow(/channel/);
    // The revocation of the channel's keys was undone with the failed insert.
    expect((await storage.findKeyByHash(firstKey.hash))?.key.revokedAt).toBeNull();
    const second = { ...channel("t"), clientId: "client" };
    await expect(storage.createChannel(second, key(second.id, "t"))).rejects.toThrow(/client id/);
    expect(await storage.findChannel(second.id)).toBeNull();
  });

  it("undoes the whole write when a later statement of it fails", async () => {
    const storage = memoryStorage();
    await storage.createTenant({ id: "t", name: "T", createdAt: NOW });
    const record = channel("t");
    const first = key(record.id, "t");
    await storage.createChannel(record, first);
    await expect(storage.replaceChannelKey(record.id, { ...key(record.id, "t"), hash: first.hash }, "2025-02-02T00:00:00.000Z")).rejects.toThrow();
    expect(await storage.findKeyByHash(first.hash)).toEqual({ key: first, channel: record });
  });

  it("does nothing on migrate, and fails every call once closed", async () => {
    const storage = memoryStorage();
    await storage.migrate();
    await storage.migrate();
    await storage.createTenant({ id: "t", name: "T", createdAt: NOW });
    await storage.close();
    await expect(storage.findTenant("t")).rejects.toThrow(/closed/);
    await expect(storage.createTenant({ id: "u", name: "U", createdAt: NOW })).rejects.toThrow(/closed/);
    await expect(storage.listRecentMessages("c", 10)).rejects.toThrow(/closed/);
    await storage.close();
  });
});
