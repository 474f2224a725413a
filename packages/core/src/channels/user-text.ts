import { z } from "zod";

/** Longest user input (`payload`, `userInput`), in Unicode code points. */
export const MAX_PAYLOAD_LENGTH = 10_000;

/**
 * The Unicode code points of a string, as `[...value].length` counts them (a lone surrogate
 * is one) without making the array: that spread was 146 µs of a 10,000-character payload's
 * validation, and two of them 2 µs of every execute's (docs/benchmarks.md, "Why the code
 * looks like this").
 */
export function codePoints(value: string): number {
  let count = value.length;
  for (let i = 0; i < value.length - 1; i++) {
    const unit = value.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = value.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        count--;
        i++;
      }
    }
  }
  return count;
}

/** A user's input named `name` in messages: a string of 1 to {@link MAX_PAYLOAD_LENGTH} Unicode code points. */
export function userText(name: string) {
  return (
    z
      .string({ error: `${name} is required and must be a string` })
      // A string has at least as many UTF-16 units as code points: only a long one is counted.
      .refine((value) => value.length >= 1, `${name} must not be empty`)
      .refine(
        (value) => value.length <= MAX_PAYLOAD_LENGTH || codePoints(value) <= MAX_PAYLOAD_LENGTH,
        `${name} must be at most ${MAX_PAYLOAD_LENGTH} characters`,
      )
      // What the refinements check, for the JSON Schema: its lengths count Unicode code points too.
      .meta({ minLength: 1, maxLength: MAX_PAYLOAD_LENGTH })
  );
}
