import { z } from "zod";
import { ERROR_CODES, type ErrorCode, errorDefinition } from "../http/errors.js";

/** Every machine code of the error table. */
const CODES = Object.keys(ERROR_CODES) as [ErrorCode, ...ErrorCode[]];

/**
 * The contract's error envelope, `{ error: { code, message } }` (plus `details` on a
 * `validation_error`), as `errorReply` writes it for every {@link ERROR_CODES} code.
 */
export const errorEnvelopeSchema = z
  .strictObject({
    error: z.strictObject({
      // A string, not the contract's codes: plugins add theirs; each answer of the document names its own.
      code: z.string().min(1).meta({ description: "The machine code: what a client branches on. Its HTTP status follows from it." }),
      message: z.string().min(1).meta({ description: "A readable explanation, for people: never parse it." }),
      details: z
        .array(z.object({ path: z.string().meta({ description: "The failing field, dot-separated; empty for the body itself." }), message: z.string() }))
        .optional()
        .meta({ description: "On a `validation_error`: each failing field." }),
    }),
  })
  .meta({ description: "An error answered before a stream began, or by a route that answers JSON." });

/** The error codes of `codes` that answer `status`: the contract's in the table's order, then plugins' in theirs. */
export function codesWithStatus(codes: readonly string[], status: number): string[] {
  const own = CODES.filter((code) => codes.includes(code) && ERROR_CODES[code].status === status);
  const plugins = codes.filter((code) => !Object.hasOwn(ERROR_CODES, code) && definitionOf(code).status === status);
  return [...own, ...plugins];
}

/** The statuses `codes` answer, ascending. */
export function statusesOf(codes: readonly string[]): number[] {
  return [...new Set(codes.map((code) => definitionOf(code).status))].sort((a, b) => a - b);
}

/** A code's status and message; a route naming a code nobody declared is a mistake of its plugin. */
export function definitionOf(code: string): { status: number; message: string } {
  const definition = errorDefinition(code);
  if (!definition) throw new Error(`channelkit: a route names the error code "${code}", which no plugin declares`);
  return definition;
}
