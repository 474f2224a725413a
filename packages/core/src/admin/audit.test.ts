import { describe, expect, it } from "vitest";
import { auditCursor, auditEventId, parseAuditCursor } from "./audit.js";

describe("auditEventId", () => {
  it("makes UUIDv7s that sort in the order they were made, within one millisecond and past 4096 of them", () => {
    const ms = Date.parse("2026-01-01T00:00:00.000Z");
    const ids = Array.from({ length: 5000 }, () => auditEventId(ms));
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids.slice(0, 10)) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    // Its first 48 bits are the time.
    expect(Number.parseInt((ids[0] as string).replace("-", "").slice(0, 12), 16)).toBe(ms);
    // A later millisecond sorts after them all; an earlier clock reading never sorts before them.
    expect(auditEventId(ms + 10) > (ids.at(-1) as string)).toBe(true);
    expect(auditEventId(ms) > (ids.at(-1) as string)).toBe(true);
  });
});

describe("audit cursors", () => {
  it("round-trip an event's position and refuse anything else", () => {
    const event = { timestamp: "2026-01-01T00:00:00.000Z", id: auditEventId(Date.now()) };
    expect(parseAuditCursor(auditCursor(event as never))).toEqual(event);
    for (const bad of ["", "!!", btoa("no-separator"), btoa("a|b|c"), btoa("not a time|x")]) {
      expect(() => parseAuditCursor(bad)).toThrow(expect.objectContaining({ code: "validation_error" }));
    }
  });
});
