import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { nativeCrypto } from "./native-crypto.js";
import { createSecretBox, DEVELOPMENT_MASTER_KEY, secretBoxWith } from "./secret-box.js";

const MASTER = randomBytes(32).toString("hex");
const OTHER = randomBytes(32).toString("hex");
const SECRET = "svc_sig_0123456789abcdefghijABCDEFGHIJ";

describe("createSecretBox", () => {
  it("decrypts what it encrypted, including non-ASCII and empty strings", async () => {
    const box = createSecretBox(MASTER);
    for (const plain of [SECRET, "clé secrète 🔑", ""]) {
      expect(await box.decrypt(await box.encrypt(plain))).toBe(plain);
    }
  });

  it("decrypts with another box made from the same master key (another process)", async () => {
    const sealed = await createSecretBox(MASTER).encrypt(SECRET);
    expect(await createSecretBox(MASTER.toUpperCase()).decrypt(sealed)).toBe(SECRET);
    expect(await createSecretBox(` ${MASTER}\n`).decrypt(sealed)).toBe(SECRET);
  });

  it("makes a different ciphertext every time, never containing the plain text", async () => {
    const box = createSecretBox(MASTER);
    const sealed = await Promise.all(Array.from({ length: 20 }, () => box.encrypt(SECRET)));
    expect(new Set(sealed).size).toBe(20);
    const ivs = sealed.map((s) => s.split(":")[1]);
    expect(new Set(ivs).size).toBe(20);
    for (const s of sealed) {
      expect(s).toMatch(/^v1:[A-Za-z0-9_-]+:[A-Za-z0-9_-]+$/);
      expect(s).not.toContain(SECRET);
      expect(s).not.toContain(SECRET.slice(8, 20));
      expect(s).not.toContain(Buffer.from(SECRET).toString("base64url").slice(0, 16));
    }
  });

  it("returns null for a ciphertext made under another master key", async () => {
    const sealed = await createSecretBox(OTHER).encrypt(SECRET);
    expect(await createSecretBox(MASTER).decrypt(sealed)).toBeNull();
    expect(await createSecretBox(DEVELOPMENT_MASTER_KEY).decrypt(sealed)).toBeNull();
  });

  it("returns null for a tampered ciphertext (authenticated encryption)", async () => {
    const box = createSecretBox(MASTER);
    const [version, iv, data] = (await box.encrypt(SECRET)).split(":") as [string, string, string];
    const bytes = Buffer.from(data, "base64url");
    bytes[0] = (bytes[0] as number) ^ 1;
    expect(await box.decrypt(`${version}:${iv}:${bytes.toString("base64url")}`)).toBeNull();
    const ivBytes = Buffer.from(iv, "base64url");
    ivBytes[0] = (ivBytes[0] as number) ^ 1;
    expect(await box.decrypt(`${version}:${ivBytes.toString("base64url")}:${data}`)).toBeNull();
    expect(await box.decrypt(`${version}:${iv}:${data.slice(0, -4)}`)).toBeNull();
  });

  it.each([
    "",
    "garbage",
    "v1",
    "v1:",
    "v1::",
    "v1:abc",
    "v2:AAAAAAAAAAAAAAAA:AAAAAAAAAAAAAAAAAAAAAAAA",
    "v1:!!!:???",
    "v1:AAAA:AAAA",
  ])("returns null for the malformed value %j", async (value) => {
    expect(await createSecretBox(MASTER).decrypt(value)).toBeNull();
  });

  it("refuses a master key that is not 32 bytes in hex", () => {
    expect(() => createSecretBox("")).toThrow(TypeError);
    expect(() => createSecretBox("00".repeat(31))).toThrow(/64 hexadecimal characters/);
    expect(() => createSecretBox("00".repeat(33))).toThrow(TypeError);
    expect(() => createSecretBox(`${"0".repeat(63)}`)).toThrow(TypeError);
    expect(() => createSecretBox(`${"0".repeat(62)}zz`)).toThrow(TypeError);
    expect(() => createSecretBox(Buffer.alloc(32).toString("base64"))).toThrow(TypeError);
  });

  it("accepts the development master key", async () => {
    const box = createSecretBox(DEVELOPMENT_MASTER_KEY);
    expect(await box.decrypt(await box.encrypt(SECRET))).toBe(SECRET);
  });
});

describe("secretBoxWith: node:crypto and Web Crypto agree", () => {
  it("runs on node:crypto here, as on any Node 20.16 or later", () => {
    expect(nativeCrypto).toBeDefined();
  });

  it("opens with either path what either path sealed, and refuses the same tampered values", async () => {
    const web = secretBoxWith(MASTER, undefined);
    const native = secretBoxWith(MASTER, nativeCrypto);
    for (const plain of [SECRET, "clé secrète 🔑", ""]) {
      expect(await native.decrypt(await web.encrypt(plain))).toBe(plain);
      expect(await web.decrypt(await native.encrypt(plain))).toBe(plain);
    }
    const sealed = await web.encrypt(SECRET);
    const [version, iv, data] = sealed.split(":") as [string, string, string];
    const tampered = Buffer.from(data, "base64url");
    tampered[tampered.length - 1] = (tampered[tampered.length - 1] as number) ^ 1;
    for (const value of [
      `${version}:${iv}:${tampered.toString("base64url")}`,
      `${version}:${iv}:${data.slice(0, 20)}`,
      "v1:AAAA:AAAA",
      "v1:!!!:???",
      "v1::AAAAAAAAAAAAAAAAAAAAAAAA",
    ]) {
      expect(await web.decrypt(value)).toBeNull();
      expect(await native.decrypt(value)).toBeNull();
    }
    expect(await secretBoxWith(OTHER, nativeCrypto).decrypt(sealed)).toBeNull();
  });
});

describe("fallback master keys", () => {
  const THIRD = randomBytes(32).toString("hex");

  it("opens what a fallback key sealed, seals only under the current key, and tells which key sealed a value", async () => {
    for (const native of [nativeCrypto, undefined]) {
      const old = await secretBoxWith(OTHER, native).encrypt(SECRET);
      const box = secretBoxWith(MASTER, native, [THIRD, OTHER]);
      expect(await box.decrypt(old)).toBe(SECRET);
      expect(await box.sealedUnder(old)).toBe("fallback");
      const sealed = await box.encrypt(SECRET);
      expect(await box.sealedUnder(sealed)).toBe("current");
      expect(await createSecretBox(MASTER).decrypt(sealed)).toBe(SECRET);
      expect(await createSecretBox(OTHER).decrypt(sealed)).toBeNull();
      expect(await box.sealedUnder(await createSecretBox(randomBytes(32).toString("hex")).encrypt(SECRET))).toBeNull();
      expect(await box.sealedUnder("v1:garbage")).toBeNull();
    }
  });

  it("a fallback that is the current key in another spelling still counts as current", async () => {
    const box = createSecretBox(MASTER, [MASTER.toUpperCase()]);
    expect(await box.sealedUnder(await createSecretBox(MASTER).encrypt(SECRET))).toBe("current");
  });

  it("refuses a malformed fallback key by its place in the list, without echoing it", () => {
    expect(() => createSecretBox(MASTER, [OTHER, "abc"])).toThrow(/^Fallback master key 2 \(CHANNELKIT_SECRET_KEY_FALLBACKS\) must be 32 bytes/);
    try {
      createSecretBox(MASTER, ["abc"]);
    } catch (error) {
      expect((error as Error).message).not.toContain("abc");
    }
  });
});
