import { z } from "zod";
import { ERROR_CODES, type ErrorCode } from "../http/errors.js";

/** Every machine code of the error table. */
const CODES = Object.keys(ERROR_CODES) as [ErrorCode, ...ErrorCode[]];

/**
 * The contract's error envelope, `{ error: { code, message } }` (plus `details` on a
 * `validation_error`), as `errorReply` writes it for every {@link ERROR_CODES} code.
 */
export const errorEnvelopeSchema = z
  .strictObject({
    error: z.strictObject({
      code: z.enum(CODES).meta({ description: "The machine code: what a client branches on. Its HTTP status follows from it." }),
      message: z.string().min(1).meta({ description: "A readable explanation, for people: never parse it." }),
      details: z
        .array(z.object({ path: z.string().meta({ description: "The failing field, dot-separated; empty for the body itself." }), message: z.string() }))
        .optional()
        .meta({ description: "On a `validation_error`: each failing field." }),
    }),
  })
  .meta({ description: "An error answered before a stream began, or by a route that answers JSON." });

/** The error codes of `codes` that answer `status`, in the table's order. */
export function codesWithStatus(codes: readonly ErrorCode[], status: number): ErrorCode[] {
  return CODES.filter((code) => codes.includes(code) && ERROR_CODES[code].status === status);
}

/** The statuses `codes` answer, ascending. */
export function statusesOf(codes: readonly ErrorCode[]): number[] {
  return [...new Set(codes.map((code) => ERROR_CODES[code].status))].sort((a, b) => a - b);
}
