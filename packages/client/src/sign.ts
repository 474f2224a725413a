const encoder = new TextEncoder();

/** The HMAC key of the last secret used: most clients sign with one secret. */
let cached: { secret: string; key: Promise<CryptoKey> } | undefined;

function hmacKey(secret: string): Promise<CryptoKey> {
  if (cached?.secret !== secret) {
    cached = { secret, key: crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]) };
  }
  return cached.key;
}

/**
 * An `X-Service-Signature` header for `body`, as the service verifies it:
 * `t=<unix seconds>,v1=<lowercase hex HMAC-SHA256>`, keyed with the secret's UTF-8 bytes, over
 * `<t>.` followed by the exact bytes of the body. Computed with Web Crypto. The client signs
 * its own requests when it has a signing secret; this is for requests sent some other way.
 *
 * @param secret - The channel's signing secret (`svc_sig_…`).
 * @param body - The raw body, exactly as it will be sent: a string is encoded as UTF-8.
 * @param timestamp - Unix seconds; now by default. The service accepts 300 seconds either side.
 *
 * @example
 * const body = JSON.stringify({ payload: "hi" });
 * await fetch(url, { method: "POST", body, headers: { "x-service-signature": await signatureHeader(secret, body), … } });
 */
export async function signatureHeader(secret: string, body: string | Uint8Array, timestamp: number = Math.floor(Date.now() / 1000)): Promise<string> {
  const bytes = typeof body === "string" ? encoder.encode(body) : body;
  const prefix = encoder.encode(`${timestamp}.`);
  const signed = new Uint8Array(prefix.length + bytes.length);
  signed.set(prefix);
  signed.set(bytes, prefix.length);
  const digest = new Uint8Array(await crypto.subtle.sign("HMAC", await hmacKey(secret), signed));
  let hex = "";
  for (const byte of digest) hex += byte.toString(16).padStart(2, "0");
  return `t=${timestamp},v1=${hex}`;
}
