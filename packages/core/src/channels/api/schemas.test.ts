import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { codePoints } from "../user-text.js";
import { ServiceError } from "../../http/errors.js";
import { validate } from "../../http/validate.js";
import { MAX_PAYLOAD_LENGTH } from "../../plugin/api.js";
import { executeRequestSchema, historyQuerySchema } from "./schemas.js";

const ok = (input: unknown) => executeRequestSchema.safeParse(input).success;

/** The validation_error `validate` throws for this body, with its details. */
function rejection(input: unknown): ServiceError {
  try {
    validate(executeRequestSchema, input);
  } catch (error) {
    expect(error).toBeInstanceOf(ServiceError);
    expect((error as ServiceError).code).toBe("validation_error");
    return error as ServiceError;
  }
  throw new Error("expected a validation_error");
}

describe("executeRequestSchema: payload", () => {
  it("counts Unicode code points, not UTF-16 units: 10000 emoji pass, 10001 fail", () => {
    expect(MAX_PAYLOAD_LENGTH).toBe(10_000);
    const emoji = "😀";
    expect(emoji.length).toBe(2);
    expect(ok({ payload: emoji.repeat(10_000) })).toBe(true);
    expect(ok({ payload: emoji.repeat(10_001) })).toBe(false);
    expect(ok({ payload: "a".repeat(10_000) })).toBe(true);
    expect(ok({ payload: "a".repeat(10_001) })).toBe(false);
  });

  it("counts a lone surrogate as one code point, a pair as one, as the string's iterator does", () => {
    expect(ok({ payload: "\ud800".repeat(10_000) })).toBe(true);
    expect(ok({ payload: "\udc00".repeat(10_001) })).toBe(false);
    expect(ok({ payload: `${"😀".repeat(9_999)}\ud800` })).toBe(true);
    expect(ok({ payload: `${"😀".repeat(9_999)}\ud800a` })).toBe(false);
    expect(ok({ payload: `\udc00${"😀".repeat(9_999)}` })).toBe(true);
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 64 }), (value) => {
        expect(codePoints(value)).toBe([...value].length);
      }),
      { numRuns: 2_000 },
    );
  });

  it("accepts one character and rejects an empty payload", () => {
    expect(ok({ payload: "a" })).toBe(true);
    expect(ok({ payload: "👋" })).toBe(true);
    const error = rejection({ payload: "" });
    expect(error.details).toEqual([{ path: "payload", message: "payload must not be empty" }]);
  });

  it("requires a string", () => {
    for (const payload of [undefined, null, 42, ["a"], { text: "a" }, true]) {
      const error = rejection(payload === undefined ? {} : { payload });
      expect((error.details as { path: string }[])[0]?.path).toBe("payload");
    }
  });

  it("rejects bodies that are not objects", () => {
    for (const body of [null, "payload", 1, [{ payload: "a" }]]) expect(ok(body)).toBe(false);
  });
});

describe("executeRequestSchema: other fields", () => {
  it("accepts a UUID conversation_id and rejects anything else", () => {
    const id = crypto.randomUUID();
    expect(executeRequestSchema.parse({ payload: "a", conversation_id: id }).conversation_id).toBe(id);
    for (const conversation_id of ["", "not-a-uuid", id.replace(/-/g, ""), `${id}x`, `{${id}}`, 123, null]) {
      const error = rejection({ payload: "a", conversation_id });
      expect((error.details as { path: string }[]).map((d) => d.path)).toEqual(["conversation_id"]);
    }
  });

  it("accepts metadata only as an object", () => {
    expect(executeRequestSchema.parse({ payload: "a", metadata: { user: { id: 1 }, tags: ["x"] } }).metadata).toEqual({
      user: { id: 1 },
      tags: ["x"],
    });
    expect(ok({ payload: "a", metadata: {} })).toBe(true);
    for (const metadata of [[], ["a"], "text", 1, null, true]) {
      const error = rejection({ payload: "a", metadata });
      expect((error.details as { path: string }[])[0]?.path).toBe("metadata");
    }
  });

  it("accepts stream only as a boolean", () => {
    expect(executeRequestSchema.parse({ payload: "a", stream: false }).stream).toBe(false);
    for (const stream of ["true", 1, null]) expect(ok({ payload: "a", stream })).toBe(false);
  });

  it("ignores and strips unknown fields", () => {
    const parsed = executeRequestSchema.parse({ payload: "a", stream: true, extra: 1, __proto__x: "y", nested: { a: 1 } });
    expect(parsed).toEqual({ payload: "a", stream: true });
    expect(Object.keys(parsed).sort()).toEqual(["payload", "stream"]);
  });

  it("reports every failing field at once", () => {
    const error = rejection({ payload: "", conversation_id: "x", metadata: [], stream: "yes" });
    expect((error.details as { path: string }[]).map((d) => d.path).sort()).toEqual(["conversation_id", "metadata", "payload", "stream"]);
    expect(error.message).toContain("payload must not be empty");
  });
});

describe("historyQuerySchema", () => {
  const parse = (query: Record<string, string>) => historyQuerySchema.safeParse(query);

  it("defaults limit to 50 and token_budget to 0", () => {
    expect(historyQuerySchema.parse({})).toEqual({ limit: 50, token_budget: 0 });
  });

  it("accepts limit from 1 to 200", () => {
    expect(historyQuerySchema.parse({ limit: "1" }).limit).toBe(1);
    expect(historyQuerySchema.parse({ limit: "200" }).limit).toBe(200);
    expect(historyQuerySchema.parse({ limit: "007" }).limit).toBe(7);
  });

  it.each(["0", "201", "-1", "1.5", "1e2", "", " 5", "abc", "0x10", "99999999999999999999"])("rejects limit=%j", (limit) => {
    expect(parse({ limit }).success).toBe(false);
  });

  it("accepts any non-negative integer token_budget", () => {
    expect(historyQuerySchema.parse({ token_budget: "0" }).token_budget).toBe(0);
    expect(historyQuerySchema.parse({ token_budget: "123456" }).token_budget).toBe(123456);
  });

  it.each(["-1", "1.5", "x", "", "9007199254740993"])("rejects token_budget=%j", (token_budget) => {
    expect(parse({ token_budget }).success).toBe(false);
  });

  it("names the failing parameter in the validation error", () => {
    let error: unknown;
    try {
      validate(historyQuerySchema, { limit: "500" });
    } catch (e) {
      error = e;
    }
    expect((error as ServiceError).code).toBe("validation_error");
    expect((error as ServiceError).message).toBe("limit must be an integer from 1 to 200");
  });
});
