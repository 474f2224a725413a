import { z } from "zod";
import { integerParam } from "../../http/validate.js";

/** Longest `payload`, in Unicode code points. */
export const MAX_PAYLOAD_LENGTH = 10_000;

const codePoints = (value: string) => [...value].length;

/** The execute request body. Unknown fields are ignored. */
export const executeRequestSchema = z.object({
  payload: z
    .string({ error: "payload is required and must be a string" })
    .refine((value) => codePoints(value) >= 1, "payload must not be empty")
    .refine((value) => codePoints(value) <= MAX_PAYLOAD_LENGTH, `payload must be at most ${MAX_PAYLOAD_LENGTH} characters`),
  metadata: z.record(z.string(), z.unknown(), { error: "metadata must be an object" }).optional(),
  conversation_id: z.uuid({ error: "conversation_id must be a UUID" }).optional(),
  stream: z.boolean({ error: "stream must be a boolean" }).optional(),
});

/** The history route's query string. */
export const historyQuerySchema = z.object({
  limit: integerParam("limit", 1, 200, 50),
  token_budget: integerParam("token_budget", 0, Number.MAX_SAFE_INTEGER, 0),
});
