import type { z } from "zod";
import { ServiceError } from "./errors.js";

/** Parses `input` with a schema, turning failures into a `validation_error` listing each issue. */
export function validate<Schema extends z.ZodType>(schema: Schema, input: unknown): z.infer<Schema> {
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  const details = parsed.error.issues.map((issue) => ({ path: issue.path.join("."), message: issue.message }));
  const message = details.map((issue) => issue.message).join("; ");
  throw new ServiceError("validation_error", message, { details });
}
