import { describe, expect, it } from "vitest";
import type { ChannelRecord } from "../storage/types.js";
import { SharedChannels } from "./shared-channels.js";

function channel(overrides: Partial<ChannelRecord> = {}): ChannelRecord {
  return {
    id: "c1",
    tenantId: "t1",
    name: "Support",
    type: "api",
    mode: "server",
    environment: "prod",
    state: "active",
    flowName: "echo",
    allowedOrigins: ["https://a.example"],
    defaultStream: false,
    requireSignature: false,
    signingSecretEncrypted: null,
    apiKeyHint: "abcd",
    clientId: null,
    languages: [],
    livechatMessages: { livechat_waiting: "Someone is coming" },
    livechatWaitTimeoutSeconds: null,
    runTimeoutSeconds: 30,
    rateLimits: null,
    resumableStreams: false,
    widget: { title: "Hi", colors: { primary: "#000" } },
    settings: {},
    sealedSettings: null,
    createdAt: "2026-01-01T00:00:00.000Z",
    updatedAt: "2026-01-01T00:00:00.000Z",
    ...overrides,
  };
}

describe("SharedChannels", () => {
  it("gives the runs of a channel the record an earlier run took, when equal", () => {
    const shared = new SharedChannels();
    const first = channel();
    expect(shared.share(first)).toBe(first);
    // A copy read by another request: the same values, another object.
    expect(shared.share(channel())).toBe(first);
    expect(shared.share(channel({ id: "c2" }))).not.toBe(first);
  });

  it("takes a changed record from then on, however deep the change", () => {
    const shared = new SharedChannels();
    const first = channel();
    shared.share(first);
    for (const change of [
      { runTimeoutSeconds: 60 },
      { allowedOrigins: ["https://a.example", "https://b.example"] },
      { allowedOrigins: ["https://b.example"] },
      { widget: { title: "Hi", colors: { primary: "#fff" } } },
      { widget: { title: "Hi" } },
      { livechatMessages: {} },
      { signingSecretEncrypted: "sealed" },
    ] as Partial<ChannelRecord>[]) {
      const changed = channel(change);
      expect(shared.share(changed)).toBe(changed);
      expect(shared.share(channel(change))).toBe(changed);
    }
    // Arrays and objects are not taken for one another.
    const asObject = channel({ languages: {} as unknown as string[] });
    expect(shared.share(asObject)).toBe(asObject);
    expect(shared.share(channel())).not.toBe(asObject);
  });
});
