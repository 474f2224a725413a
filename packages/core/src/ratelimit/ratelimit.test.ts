import { describe, expect, it } from "vitest";
import { memoryStorage } from "../storage/memory.js";
import { createChannelService } from "../service.js";
import { demoFlows } from "../flows/demo.js";
import { clientAddress, trustedHops } from "./address.js";
import { rateLimitHeaders } from "./headers.js";
import { channelRateLimitsWireSchema, serviceRateLimitsWireSchema } from "./rules.js";
import { flexibleRateLimitStore, memoryRateLimitStore } from "./store.js";

describe("clientAddress", () => {
  it("is the socket's peer when no proxy is trusted, whatever X-Forwarded-For says", () => {
    expect(clientAddress("127.0.0.1", "203.0.113.9", 0)).toBe("127.0.0.1");
  });

  it("behind trusted proxies, is the entry the farthest of them appended; what the client wrote further left is ignored", () => {
    expect(clientAddress("10.0.0.2", "203.0.113.9", 1)).toBe("203.0.113.9");
    expect(clientAddress("10.0.0.2", "6.6.6.6, 203.0.113.9", 1)).toBe("203.0.113.9");
    expect(clientAddress("10.0.0.2", "6.6.6.6, 203.0.113.9, 10.0.0.1", 2)).toBe("203.0.113.9");
    expect(clientAddress("10.0.0.2", " 2001:db8::1 ", 1)).toBe("2001:db8::1");
  });

  it("falls back to the socket when the header is missing or its entry is not an address", () => {
    expect(clientAddress("10.0.0.2", null, 1)).toBe("10.0.0.2");
    expect(clientAddress("10.0.0.2", "not an address", 1)).toBe("10.0.0.2");
    expect(clientAddress("10.0.0.2", "", 1)).toBe("10.0.0.2");
    expect(clientAddress(undefined, null, 0)).toBeUndefined();
  });

  it("takes the first entry when there are fewer entries than trusted proxies", () => {
    expect(clientAddress("10.0.0.2", "203.0.113.9", 3)).toBe("203.0.113.9");
  });
});

describe("trustedHops", () => {
  it("reads true as one proxy and refuses what is not a count", () => {
    expect(trustedHops(undefined)).toBe(0);
    expect(trustedHops(false)).toBe(0);
    expect(trustedHops(true)).toBe(1);
    expect(trustedHops(2)).toBe(2);
    expect(() => trustedHops(-1)).toThrow(/trustProxy/);
    expect(() => trustedHops(1.5)).toThrow(/trustProxy/);
  });
});

describe("rateLimitHeaders", () => {
  it("writes each limit as an item of the IETF RateLimit-Policy and RateLimit fields, and Retry-After for a refusal", () => {
    const headers = rateLimitHeaders([
      { policy: "publishable_key", rule: { requests: 100, windowSeconds: 60 }, count: { allowed: true, remaining: 99, resetMs: 59_001 } },
      { policy: "client_address", rule: { requests: 10, windowSeconds: 60 }, count: { allowed: false, remaining: 0, resetMs: 1_500 } },
    ]);
    expect(headers).toEqual({
      "ratelimit-policy": '"publishable_key";q=100;w=60, "client_address";q=10;w=60',
      ratelimit: '"publishable_key";r=99;t=60, "client_address";r=0;t=2',
      "retry-after": "2",
    });
  });
});

describe("the rate limits in the wire's names", () => {
  it("become the camel-cased limits; false lifts one, null sets nothing", () => {
    expect(channelRateLimitsWireSchema.parse({ publishable_key: { requests: 5, window_seconds: 10 }, server_key: false, client_address: null })).toEqual({
      publishableKey: { requests: 5, windowSeconds: 10 },
      serverKey: false,
    });
    expect(channelRateLimitsWireSchema.parse(null)).toEqual({});
    expect(serviceRateLimitsWireSchema.parse({ failed_auth: { requests: 3, window_seconds: 60 }, admin: false })).toEqual({
      failedAuth: { requests: 3, windowSeconds: 60 },
      admin: false,
    });
  });

  it("name what is wrong", () => {
    const unknown = channelRateLimitsWireSchema.safeParse({ failed_auth: { requests: 3, window_seconds: 60 } });
    expect(unknown.error?.issues[0]?.message).toBe("rate_limits takes publishable_key, server_key, client_address, webhook_client, not failed_auth");
    const zero = channelRateLimitsWireSchema.safeParse({ publishable_key: { requests: 0, window_seconds: 60 } });
    expect(zero.error?.issues[0]?.message).toBe("requests must be 1 to 1000000000");
  });
});

describe("stores", () => {
  it("count per name, rule and key, and tell how long until the window ends", async () => {
    const store = memoryRateLimitStore();
    const rule = { requests: 2, windowSeconds: 30 };
    expect(await store.consume("a", rule, "k")).toMatchObject({ allowed: true, remaining: 1 });
    expect(await store.consume("a", rule, "k")).toMatchObject({ allowed: true, remaining: 0 });
    const refused = await store.consume("a", rule, "k");
    expect(refused).toMatchObject({ allowed: false, remaining: 0 });
    expect(refused.resetMs).toBeGreaterThan(29_000);
    expect(refused.resetMs).toBeLessThanOrEqual(30_000);
    expect(await store.consume("b", rule, "k")).toMatchObject({ allowed: true });
    expect(await store.consume("a", rule, "other")).toMatchObject({ allowed: true });
    expect(await store.consume("a", { requests: 3, windowSeconds: 30 }, "k")).toMatchObject({ allowed: true, remaining: 2 });
  });

  it("a store that fails fails the request rather than let it through uncounted", async () => {
    const store = flexibleRateLimitStore(() => ({ consume: () => Promise.reject(new Error("store down")) }));
    await expect(store.consume("a", { requests: 1, windowSeconds: 1 }, "k")).rejects.toThrow("store down");
  });
});

describe("the rateLimits option", () => {
  it("is checked at start-up", async () => {
    await expect(
      createChannelService({
        storage: memoryStorage(),
        flows: demoFlows,
        logger: { warn() {}, error() {} },
        rateLimits: { admin: { requests: 0, windowSeconds: 60 } },
      }),
    ).rejects.toThrow(/invalid rateLimits option: admin/);
    await expect(createChannelService({ storage: memoryStorage(), flows: demoFlows, logger: { warn() {}, error() {} }, trustProxy: -2 })).rejects.toThrow(
      /trustProxy/,
    );
  });
});
