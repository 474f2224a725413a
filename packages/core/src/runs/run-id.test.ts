import { describe, expect, it } from "vitest";
import { z } from "zod";
import { newRecordId } from "./run-id.js";

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
});
