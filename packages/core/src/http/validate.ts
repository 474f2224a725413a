import { z } from "zod";
import { ServiceError } from "./errors.js";

/** Parses `input` with a schema, turning failures into a `validation_error` listing each issue. */
export function validate<Schema extends z.ZodType>(schema: Schema, input: unknown): z.infer<Schema> {
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  const details = parsed.error.issues.map((issue) => ({ path: issue.path.join("."), message: issue.message }));
  const message = details.map((issue) => issue.message).join("; ");
  throw new ServiceError("validation_error", message, { details });
}

/**
 * An integer query parameter from `min` to `max`, `fallback` when absent. Its JSON Schema
 * (the OpenAPI document's) is the integer it stands for, not the string it is sent as.
 */
export const integerParam = (name: string, min: number, max: number, fallback: number, description?: string) =>
  z
    .string()
    .meta({ type: "integer", minimum: min, maximum: max, default: fallback })
    .optional()
    .transform((value, ctx) => {
      if (value === undefined) return fallback;
      const number = /^\d+$/.test(value) ? Number(value) : Number.NaN;
      if (!Number.isSafeInteger(number) || number < min || number > max) {
        ctx.addIssue({ code: "custom", message: `${name} must be an integer from ${min} to ${max}` });
        return z.NEVER;
      }
      return number;
    })
    .meta(description === undefined ? {} : { description });
