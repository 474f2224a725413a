import { ServiceError } from "../http/errors.js";
import { timingSafeEqual, toHex, utf8 } from "./encoding.js";
import { nativeCrypto } from "./native-crypto.js";

/** Seconds either side of now that a signature timestamp may be. */
export const SIGNATURE_TOLERANCE_SECONDS = 300;

interface ParsedSignature {
  timestamp: string;
  signatures: string[];
}

/**
 * Parses `t=<unix seconds>,v1=<hex>[,v1=<hex>...]`; other schemes are ignored, as Stripe does.
 * A `v1` that is not a digest's 64 lowercase hex digits is left out rather than failing the
 * header: it can match nothing, and any `v1` that matches passes (decisions.md, as Stripe
 * does). Null when there is no `t`, or no `v1` left to compare.
 */
export function parseSignatureHeader(header: string): ParsedSignature | null {
  let timestamp: string | undefined;
  const signatures: string[] = [];
  for (const part of header.split(",")) {
    const eq = part.indexOf("=");
    if (eq < 0) return null;
    const name = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (name === "t") {
      if (timestamp !== undefined || !/^\d{1,15}$/.test(value)) return null;
      timestamp = value;
    } else if (name === "v1") {
      if (/^[0-9a-f]{64}$/.test(value)) signatures.push(value);
    }
  }
  if (timestamp === undefined || signatures.length === 0) return null;
  return { timestamp, signatures };
}

/**
 * Lowercase hex HMAC-SHA256 of `<timestamp>.<body>` keyed with the secret's UTF-8 bytes
 * (node:crypto where available, else Web Crypto).
 */
export async function computeSignature(secret: string, timestamp: string, body: Uint8Array): Promise<string> {
  if (nativeCrypto)
    return nativeCrypto
      .createHmac("sha256", utf8(secret))
      .update(utf8(`${timestamp}.`))
      .update(body)
      .digest("hex");
  return webComputeSignature(secret, timestamp, body);
}

/** {@link computeSignature} on Web Crypto only. */
export async function webComputeSignature(secret: string, timestamp: string, body: Uint8Array): Promise<string> {
  const key = await crypto.subtle.importKey("raw", utf8(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const prefix = utf8(`${timestamp}.`);
  const signed = new Uint8Array(prefix.length + body.length);
  signed.set(prefix, 0);
  signed.set(body, prefix.length);
  return toHex(await crypto.subtle.sign("HMAC", key, signed));
}

/**
 * Builds an `X-Service-Signature` header for `body`, as a client would. Useful in tests and
 * in server-side callers written in TypeScript.
 */
export async function signRequestBody(secret: string, body: string | Uint8Array, timestamp: number = Math.floor(Date.now() / 1000)): Promise<string> {
  const bytes = typeof body === "string" ? utf8(body) : body;
  return `t=${timestamp},v1=${await computeSignature(secret, String(timestamp), bytes)}`;
}

/**
 * Verifies a signature header over the exact raw body: the digest first, then the window,
 * as Stripe does, so a stale but genuine request reads `signature_expired`. `headerName` is
 * the header the caller read, named in the refusals (the live-chat bridge reads its own).
 */
export async function verifySignature(
  header: string | null,
  secret: string,
  body: Uint8Array,
  nowSeconds: number = Math.floor(Date.now() / 1000),
  headerName = "X-Service-Signature",
): Promise<void> {
  const named = headerName === "X-Service-Signature" ? undefined : headerName;
  if (header === null) throw new ServiceError("signature_required", named && `This call requires an ${named} header.`);
  const invalid = () => new ServiceError("invalid_signature", named && `The ${named} header is malformed or does not match the body.`);
  const parsed = parseSignatureHeader(header);
  if (!parsed) throw invalid();
  const expected = await computeSignature(secret, parsed.timestamp, body);
  let matched = false;
  for (const candidate of parsed.signatures) matched = timingSafeEqual(candidate, expected) || matched;
  if (!matched) throw invalid();
  if (Math.abs(nowSeconds - Number(parsed.timestamp)) > SIGNATURE_TOLERANCE_SECONDS) {
    throw new ServiceError("signature_expired");
  }
}
