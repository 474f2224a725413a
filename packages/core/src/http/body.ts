import { ServiceError } from "./errors.js";
import type { IncomingRequest, RequestHeaders } from "./reply.js";

/** What reading a body needs of a request: a plugin's `RouteRequest` has it too. */
export type WithBody = Pick<IncomingRequest, "body" | "arrayBuffer" | "bytes"> & { readonly headers: Pick<RequestHeaders, "get"> };

/** Rejects any body that is not JSON; media-type parameters such as `charset` are allowed. */
export function requireJsonContentType(request: { readonly headers: Pick<RequestHeaders, "get"> }): void {
  const type = request.headers.get("content-type");
  const essence = type?.split(";")[0]?.trim().toLowerCase();
  if (essence !== "application/json") throw new ServiceError("unsupported_media_type");
}

/**
 * Reads the exact raw body bytes (HMAC is computed over them), refusing more than
 * `maxBytes` without buffering the excess. A body that cannot be read to its end (the client
 * aborted its upload, a broken chunked encoding) is the client's failure, `400 bad_request`,
 * never an error of the service: anyone could otherwise fill the host's error log.
 */
export async function readRawBody(request: WithBody, maxBytes: number): Promise<Uint8Array> {
  try {
    return await readBytes(request, maxBytes);
  } catch (error) {
    if (error instanceof ServiceError) throw error;
    throw new ServiceError("bad_request", "The request body could not be read to its end.");
  }
}

async function readBytes(request: WithBody, maxBytes: number): Promise<Uint8Array> {
  const declared = request.headers.get("content-length");
  if (declared !== null) {
    if (Number(declared) > maxBytes) throw tooLarge(maxBytes);
    // HTTP framing ends the body at the declared length, so it can be read whole; reading
    // it whole skips a stream, which on Node costs more than the read itself.
    const body = request.bytes ? await request.bytes() : new Uint8Array(await request.arrayBuffer());
    if (body.byteLength > maxBytes) throw tooLarge(maxBytes);
    return body;
  }
  if (request.body === null) return new Uint8Array(0);
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge(maxBytes);
    }
    chunks.push(value);
  }
  if (chunks.length === 1) return chunks[0] as Uint8Array;
  const body = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    body.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return body;
}

const utf8Decoder = new TextDecoder("utf-8", { fatal: true });

/** Deepest nesting of arrays and objects a JSON body may have (the body itself is depth 1). */
export const MAX_JSON_DEPTH = 32;

/**
 * Parses JSON bytes. Invalid UTF-8 or JSON, nesting deeper than {@link MAX_JSON_DEPTH}, or a
 * string that is not well-formed Unicode (a lone surrogate such as `"\ud800"`, which no
 * store could keep as sent) is a `validation_error`. The depth is checked on the text before
 * it is parsed: a megabyte of `[` must cost a scan, not a parse.
 */
export function parseJson(bytes: Uint8Array): unknown {
  let text: string;
  try {
    text = utf8Decoder.decode(bytes);
  } catch {
    throw new ServiceError("validation_error", "The body is not valid JSON: it is not UTF-8.");
  }
  if (nestingDepth(text) > MAX_JSON_DEPTH) {
    throw new ServiceError("validation_error", `The body is nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects.`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ServiceError("validation_error", "The body is not valid JSON.");
  }
  // Only an escape can write a lone surrogate: UTF-8 bytes cannot.
  if (text.includes("\\u") && !wellFormed(value)) {
    throw new ServiceError("validation_error", "The body has a string that is not well-formed Unicode (a lone surrogate).");
  }
  return value;
}

/** The deepest nesting of `[` and `{` outside strings, stopping early past the limit. */
function nestingDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > deepest) {
        deepest = depth;
        if (deepest > MAX_JSON_DEPTH) return deepest;
      }
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return deepest;
}

/** A surrogate code unit without its pair. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Whether every string of a parsed JSON value, keys included, is well-formed Unicode. */
function wellFormed(value: unknown): boolean {
  if (typeof value === "string") return !LONE_SURROGATE.test(value);
  if (typeof value !== "object" || value === null) return true;
  if (Array.isArray(value)) return value.every(wellFormed);
  for (const [key, item] of Object.entries(value)) if (LONE_SURROGATE.test(key) || !wellFormed(item)) return false;
  return true;
}

function tooLarge(maxBytes: number): ServiceError {
  return new ServiceError("payload_too_large", `The request body is larger than ${maxBytes} bytes.`);
}
