import { ServiceError } from "./errors.js";
import type { IncomingRequest, RequestHeaders } from "./reply.js";

/** What reading a body needs of a request: a plugin's `RouteRequest` has it too. */
type WithBody = Pick<IncomingRequest, "body" | "arrayBuffer" | "bytes"> & { readonly headers: Pick<RequestHeaders, "get"> };

/** Rejects any body that is not JSON; media-type parameters such as `charset` are allowed. */
export function requireJsonContentType(request: { readonly headers: Pick<RequestHeaders, "get"> }): void {
  const type = request.headers.get("content-type");
  const essence = type?.split(";")[0]?.trim().toLowerCase();
  if (essence !== "application/json") throw new ServiceError("unsupported_media_type");
}

/**
 * Reads the exact raw body bytes (HMAC is computed over them), refusing more than
 * `maxBytes` without buffering the excess.
 */
export async function readRawBody(request: WithBody, maxBytes: number): Promise<Uint8Array> {
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

/** Parses JSON bytes; invalid UTF-8 or JSON is a `validation_error`. */
export function parseJson(bytes: Uint8Array): unknown {
  try {
    return JSON.parse(utf8Decoder.decode(bytes));
  } catch {
    throw new ServiceError("validation_error", "The body is not valid JSON.");
  }
}

function tooLarge(maxBytes: number): ServiceError {
  return new ServiceError("payload_too_large", `The request body is larger than ${maxBytes} bytes.`);
}
