import fc from "fast-check";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { readRow, readText, storedParameter, textTypes } from "./text-codec.js";

describe("text as PostgreSQL and Deno's node:sqlite store it", () => {
  it("round-trips any string, and stores none with U+0000", () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom("\u0000", "\u0001", "0", "1", "a", "é", "😀") }), fc.string({ unit: "binary" }), (odd, any) => {
        for (const text of [odd, any, odd + any]) {
          const stored = storedParameter(text) as string;
          expect(stored).not.toContain("\u0000");
          expect(readText(stored)).toBe(text);
        }
      }),
    );
  });

  it("leaves text without U+0000 and U+0001, and every other value, as it is", () => {
    const text = "plain text, 0 and 1, é 😀";
    expect(storedParameter(text)).toBe(text);
    expect(readText(text)).toBe(text);
    const values = [null, 1, true, new Uint8Array([0, 1]), ["a\u0000"]];
    for (const value of values) expect(storedParameter(value)).toBe(value);
  });

  it("reads back every text value of a row, and nothing else", () => {
    const bytes = new Uint8Array([1, 48]);
    expect(readRow({ a: "x\u00010", b: 7, c: null, d: bytes, e: "plain" })).toEqual({ a: "x\u0000", b: 7, c: null, d: bytes, e: "plain" });
  });

  it("parses text and varchar with readText, other types as pg does", () => {
    const types = textTypes(pg);
    expect((types.getTypeParser(25, "text") as (v: string) => unknown)("a\u00010")).toBe("a\u0000");
    expect((types.getTypeParser(1043, "text") as (v: string) => unknown)("\u00011")).toBe("\u0001");
    expect((types.getTypeParser(20, "text") as (v: string) => unknown)("42")).toBe(pg.types.getTypeParser(20, "text")("42"));
  });
});
