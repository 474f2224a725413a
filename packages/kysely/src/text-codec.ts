import type pg from "pg";

/**
 * Text that some drivers cannot keep whole: PostgreSQL's `text` cannot hold U+0000 (`invalid
 * byte sequence for encoding "UTF8": 0x00`), and Deno's `node:sqlite` stores it but reads a
 * value back only up to it. SQLite and JavaScript strings hold it, and a user's message, a
 * flow's reply or an error may carry one. With these drivers every string parameter is stored
 * escaped and every text value read back is unescaped, so that any text round-trips on every
 * store. The escape is U+0001, itself escaped: U+0000 is stored as U+0001 "0", U+0001 as
 * U+0001 "1". Text without either (all of it, in practice) is stored and read as it is.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: the two characters are what is escaped.
const ESCAPED = /[\u0000\u0001]/g;
// biome-ignore lint/suspicious/noControlCharactersInRegex: the escape and what follows it.
const STORED = /\u0001([01])/g;

/** A statement's parameter as stored: strings escaped, anything else as it is. */
export function storedParameter(value: unknown): unknown {
  if (typeof value !== "string" || (value.indexOf("\u0000") < 0 && value.indexOf("\u0001") < 0)) return value;
  return value.replace(ESCAPED, (char) => (char === "\u0000" ? "\u00010" : "\u00011"));
}

/** A text value as read back (see {@link storedParameter}). */
export function readText(value: string): string {
  return value.indexOf("\u0001") < 0 ? value : value.replace(STORED, (_, code: string) => (code === "0" ? "\u0000" : "\u0001"));
}

/** A row as read back: each of its text values through {@link readText}. */
export function readRow(row: Record<string, unknown>): Record<string, unknown> {
  for (const key in row) {
    const value = row[key];
    if (typeof value === "string") row[key] = readText(value);
  }
  return row;
}

/** PostgreSQL's type OIDs of `text` and `varchar`. */
const TEXT_OIDS = new Set([25, 1043]);

/** pg's type parsers with {@link readText} for text values, for a query's `types`. */
export function textTypes(driver: typeof pg): pg.CustomTypesConfig {
  return {
    getTypeParser: ((oid: number, format?: "text" | "binary") =>
      TEXT_OIDS.has(oid) && format !== "binary" ? readText : driver.types.getTypeParser(oid, format)) as pg.CustomTypesConfig["getTypeParser"],
  };
}
