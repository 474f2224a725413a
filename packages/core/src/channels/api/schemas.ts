import { z } from "zod";
import { integerParam } from "../../http/validate.js";
import { userText } from "../user-text.js";

export { MAX_PAYLOAD_LENGTH } from "../user-text.js";

/** Longest `metadata` of an execute, as JSON text: it travels into every flow and may be stored by them. */
export const MAX_METADATA_LENGTH = 16_384;

/** A run's `metadata`: an object of at most {@link MAX_METADATA_LENGTH} characters of JSON. */
export const metadataSchema = z
  .record(z.string(), z.unknown(), { error: "metadata must be an object" })
  .refine((value) => JSON.stringify(value).length <= MAX_METADATA_LENGTH, `metadata must be at most ${MAX_METADATA_LENGTH} characters of JSON`)
  .optional();

/** The execute request body. Unknown fields are ignored. */
export const executeRequestSchema = z.object({
  payload: userText("payload"),
  metadata: metadataSchema,
  conversation_id: z.uuid({ error: "conversation_id must be a UUID" }).optional(),
  stream: z.boolean({ error: "stream must be a boolean" }).optional(),
});

/** The history route's query string. */
export const historyQuerySchema = z.object({
  limit: integerParam("limit", 1, 200, 50),
  token_budget: integerParam("token_budget", 0, Number.MAX_SAFE_INTEGER, 0),
});
