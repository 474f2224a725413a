import { describe, expect, it } from "vitest";
import { isoTimestamp } from "./timestamp.js";

describe("isoTimestamp", () => {
  it("writes what Date.prototype.toISOString writes", () => {
    const now = Date.now();
    const times = [
      0,
      1,
      9,
      10,
      99,
      100,
      999,
      1000,
      1001,
      -1,
      -999,
      -1000,
      -1001,
      now,
      now + 1,
      now + 1000,
      now - 1,
      Date.UTC(1999, 11, 31, 23, 59, 59, 999),
      Date.UTC(2000, 0, 1),
      Date.UTC(2024, 1, 29, 12, 0, 0, 5),
      Date.UTC(9999, 11, 31, 23, 59, 59, 999),
      Date.UTC(10000, 0, 1),
      Date.UTC(-1, 0, 1),
      Date.UTC(0, 0, 1) - 1,
      8.64e15,
      -8.64e15,
    ];
    for (let i = 0; i < 2000; i++) times.push(Math.floor(Math.random() * 4e12) - 1e12);
    for (const ms of times) expect(isoTimestamp(ms), String(ms)).toBe(new Date(ms).toISOString());
  });

  it("is right when the second changes back and forth (the cached part is per second)", () => {
    const base = Date.UTC(2026, 10, 22, 12, 0, 0, 0);
    for (const ms of [base + 998, base + 999, base + 1000, base + 999, base + 1, base + 2000, base + 1999]) {
      expect(isoTimestamp(ms)).toBe(new Date(ms).toISOString());
    }
  });

  it("refuses what toISOString refuses", () => {
    expect(() => isoTimestamp(Number.NaN)).toThrow(RangeError);
    expect(() => isoTimestamp(8.64e15 + 1)).toThrow(RangeError);
  });
});
