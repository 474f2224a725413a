import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { sha256Hex, webSha256Hex } from "./encoding.js";

describe("sha256Hex", () => {
  it("gives the same lowercase hex on node:crypto and on Web Crypto, for any string", async () => {
    for (const value of ["", "svc_live_abc", "clé 🔑 ü", "lone \ud800 surrogate", "x".repeat(10_000)]) {
      const expected = createHash("sha256").update(value, "utf8").digest("hex");
      expect(await sha256Hex(value)).toBe(expected);
      expect(await webSha256Hex(value)).toBe(expected);
    }
  });
});
