import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { apiKeyHint, generateApiKey, hashApiKey, hashesEqual, KEY_PREFIXES, parseApiKey, prefixFor, prefixMatchesMode, randomBase62 } from "./api-keys.js";

describe("generateApiKey", () => {
  it.each(KEY_PREFIXES)("makes %s keys: the prefix then at least 40 base62 characters", (prefix) => {
    const key = generateApiKey(prefix);
    expect(key.startsWith(prefix)).toBe(true);
    const secret = key.slice(prefix.length);
    expect(secret).toMatch(/^[0-9A-Za-z]+$/);
    expect(secret.length).toBeGreaterThanOrEqual(40);
    expect(parseApiKey(key)).toEqual({ prefix, secret });
  });

  it("never repeats itself", () => {
    const keys = new Set(Array.from({ length: 2000 }, () => generateApiKey("svc_live_")));
    expect(keys.size).toBe(2000);
  });

  it("uses the whole base62 alphabet evenly, without modulo bias", () => {
    // 124,000 characters: 2,000 expected per character (sd about 45). Taking `byte % 62` of
    // every byte would give the first eight characters 5/256 each, about 2,420.
    const sample = Array.from({ length: 124 }, () => randomBase62(1000)).join("");
    expect(sample).toHaveLength(124_000);
    const counts = new Map<string, number>();
    for (const char of sample) counts.set(char, (counts.get(char) ?? 0) + 1);
    expect(counts.size).toBe(62);
    for (const count of counts.values()) {
      expect(count).toBeGreaterThan(1750);
      expect(count).toBeLessThan(2250);
    }
  });
});

describe("parseApiKey", () => {
  const secret = "A".repeat(43);

  it("splits each kind of key into prefix and secret", () => {
    expect(parseApiKey(`svc_live_${secret}`)).toEqual({ prefix: "svc_live_", secret });
    expect(parseApiKey(`svc_test_${secret}`)).toEqual({ prefix: "svc_test_", secret });
    expect(parseApiKey(`svc_pub_${secret}`)).toEqual({ prefix: "svc_pub_", secret });
  });

  it("accepts base64url secrets too", () => {
    expect(parseApiKey(`svc_live_${"a-b_".repeat(10)}`)).toEqual({ prefix: "svc_live_", secret: "a-b_".repeat(10) });
  });

  it("rejects unknown prefixes, short secrets and foreign characters", () => {
    expect(parseApiKey(`svc_prod_${secret}`)).toBeNull();
    expect(parseApiKey(`sk_live_${secret}`)).toBeNull();
    expect(parseApiKey(secret)).toBeNull();
    expect(parseApiKey(`svc_live_${"a".repeat(39)}`)).toBeNull();
    expect(parseApiKey(`svc_live_${"a".repeat(40)}`)).not.toBeNull();
    expect(parseApiKey(`svc_live_${secret}!`)).toBeNull();
    expect(parseApiKey(`svc_live_${secret} `)).toBeNull();
    expect(parseApiKey(` svc_live_${secret}`)).toBeNull();
    expect(parseApiKey("")).toBeNull();
  });
});

describe("hashApiKey", () => {
  it("is the lowercase hex SHA-256 of the whole key string", async () => {
    const key = generateApiKey("svc_test_");
    const expected = createHash("sha256").update(key, "utf8").digest("hex");
    expect(await hashApiKey(key)).toBe(expected);
    expect(await hashApiKey("svc_live_é")).toBe(createHash("sha256").update("svc_live_é", "utf8").digest("hex"));
  });

  it("differs between keys and never contains the key", async () => {
    const a = generateApiKey("svc_live_");
    const b = generateApiKey("svc_live_");
    const [ha, hb] = await Promise.all([hashApiKey(a), hashApiKey(b)]);
    expect(ha).not.toBe(hb);
    expect(ha).toMatch(/^[0-9a-f]{64}$/);
    expect(ha).not.toContain(a.slice(9, 20));
  });

  it("hashesEqual compares exactly", async () => {
    const h = await hashApiKey("svc_live_x");
    expect(hashesEqual(h, h)).toBe(true);
    expect(hashesEqual(h, `${h.slice(0, -1)}${h.endsWith("0") ? "1" : "0"}`)).toBe(false);
    expect(hashesEqual(h, h.slice(0, -1))).toBe(false);
  });
});

describe("apiKeyHint", () => {
  it("masks the key as prefix + **** + last four characters", () => {
    expect(apiKeyHint(`svc_live_${"x".repeat(39)}abcd`)).toBe("svc_live_****abcd");
    expect(apiKeyHint(`svc_test_${"x".repeat(39)}A1b2`)).toBe("svc_test_****A1b2");
    expect(apiKeyHint(`svc_pub_${"x".repeat(39)}9Zz0`)).toBe("svc_pub_****9Zz0");
  });

  it("never reveals more than four characters of the secret", () => {
    const key = generateApiKey("svc_live_");
    const hint = apiKeyHint(key);
    expect(hint).toBe(`svc_live_****${key.slice(-4)}`);
    expect(hint.replace("svc_live_****", "")).toHaveLength(4);
  });
});

describe("prefixFor and prefixMatchesMode", () => {
  it("picks svc_pub_ for public channels of every environment", () => {
    expect(prefixFor("public", "prod")).toBe("svc_pub_");
    expect(prefixFor("public", "dev")).toBe("svc_pub_");
    expect(prefixFor("public", "staging")).toBe("svc_pub_");
  });

  it("picks svc_live_ for prod server channels and svc_test_ for dev and staging", () => {
    expect(prefixFor("server", "prod")).toBe("svc_live_");
    expect(prefixFor("server", "dev")).toBe("svc_test_");
    expect(prefixFor("server", "staging")).toBe("svc_test_");
  });

  it("matches public keys to public channels only, server keys to server channels only", () => {
    expect(prefixMatchesMode("svc_pub_", "public")).toBe(true);
    expect(prefixMatchesMode("svc_pub_", "server")).toBe(false);
    expect(prefixMatchesMode("svc_live_", "server")).toBe(true);
    expect(prefixMatchesMode("svc_test_", "server")).toBe(true);
    expect(prefixMatchesMode("svc_live_", "public")).toBe(false);
    expect(prefixMatchesMode("svc_test_", "public")).toBe(false);
  });
});
