import { z } from "zod";

/** Longest user input (`payload`, `userInput`), in Unicode code points. */
export const MAX_PAYLOAD_LENGTH = 10_000;

const codePoints = (value: string) => [...value].length;

/** A user's input named `name` in messages: a string of 1 to {@link MAX_PAYLOAD_LENGTH} Unicode code points. */
export function userText(name: string) {
  return (
    z
      .string({ error: `${name} is required and must be a string` })
      .refine((value) => codePoints(value) >= 1, `${name} must not be empty`)
      .refine((value) => codePoints(value) <= MAX_PAYLOAD_LENGTH, `${name} must be at most ${MAX_PAYLOAD_LENGTH} characters`)
      // What the refinements check, for the JSON Schema: its lengths count Unicode code points too.
      .meta({ minLength: 1, maxLength: MAX_PAYLOAD_LENGTH })
  );
}
