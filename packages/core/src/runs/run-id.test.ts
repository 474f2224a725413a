import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { newRecordId, newUuid } from "./run-id.js";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

/** Heap bytes per string `make` returns, kept, after full collections. */
function heapPerId(make: () => string): number {
  const count = 10_000;
  const kept: string[] = new Array(count);
  // Code compiled while measuring would count as heap: make some first, and let them go.
  for (let i = 0; i < count; i++) kept[i] = make();
  kept.fill("");
  gc();
  gc();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < count; i++) kept[i] = make();
  gc();
  gc();
  const bytes = (process.memoryUsage().heapUsed - before) / count;
  expect(new Set(kept).size).toBe(count);
  return bytes;
}

describe("newRecordId", () => {
  it("is a version 7 UUID (RFC 9562) that the contract's UUID checks accept", () => {
    for (let i = 0; i < 1000; i++) {
      const id = newRecordId();
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(z.uuid().safeParse(id).success).toBe(true);
    }
  });

  it("starts with the time it was made, so ids of later runs sort after earlier ones (pages of an index shared: docs/benchmarks.md)", async () => {
    const before = Date.now();
    const first = newRecordId();
    await new Promise((done) => setTimeout(done, 3));
    const second = newRecordId();
    const millis = (id: string) => Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
    expect(millis(first)).toBeGreaterThanOrEqual(before);
    expect(millis(first)).toBeLessThanOrEqual(Date.now());
    expect(second > first).toBe(true);
  });

  it("keeps 74 random bits: a thousand ids made in one millisecond are distinct", () => {
    const ids = new Set(Array.from({ length: 1000 }, newRecordId));
    expect(ids.size).toBe(1000);
  });

  it("is one flat string of 36 characters, not the pieces it was built of (docs/benchmarks.md, Memory per open stream)", () => {
    // A flat one-byte string of 36 characters is 56 bytes; built of a prefix and a slice, 170 with its parts.
    expect(heapPerId(newRecordId)).toBeLessThan(100);
  });
});

describe("newUuid", () => {
  it("is a random (version 4) UUID", () => {
    for (let i = 0; i < 1000; i++) expect(newUuid()).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it("is one flat string, where crypto.randomUUID() is a tree of 20 pieces (docs/benchmarks.md, Memory per open stream)", () => {
    // 56 bytes flat, about 500 as randomUUID() builds it.
    expect(heapPerId(newUuid)).toBeLessThan(100);
  });
});
