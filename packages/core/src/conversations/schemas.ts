import { z } from "zod";

/** Longest `metadata` of an execute, as JSON text: it travels into every flow and may be stored by them. */
export const MAX_METADATA_LENGTH = 16_384;

/** A run's `metadata`: an object of at most {@link MAX_METADATA_LENGTH} characters of JSON. */
export const metadataSchema = z
  .record(z.string(), z.unknown(), { error: "metadata must be an object" })
  .refine((value) => JSON.stringify(value).length <= MAX_METADATA_LENGTH, `metadata must be at most ${MAX_METADATA_LENGTH} characters of JSON`)
  .meta({ description: `Free contextual data for the flow: an object of at most ${MAX_METADATA_LENGTH} characters of JSON.` })
  .optional();

/**
 * A request's `conversation_id`: a UUID in its text form (8-4-4-4-12 hex digits, any case),
 * of any version or variant. One the storage does not know is then 404
 * `conversation_not_found`, as an unknown id in history's path is.
 */
export const conversationIdSchema = z.guid({ error: "conversation_id must be a UUID" });
