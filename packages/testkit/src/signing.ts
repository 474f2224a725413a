import { createHmac } from "node:crypto";

/** Current Unix time in seconds, as the server reads it. */
export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

/**
 * Hex HMAC-SHA256 of `<t>.<raw body>`, computed independently of the service's own code so
 * that the suite checks the contract rather than the implementation against itself.
 */
export function digest(secret: string, timestamp: number, body: string | Uint8Array): string {
  return createHmac("sha256", secret).update(`${timestamp}.`).update(body).digest("hex");
}

/** An `X-Service-Signature` header: `t=<t>,v1=<digest>`. */
export function signatureHeader(secret: string, body: string | Uint8Array, timestamp = nowSeconds()): string {
  return `t=${timestamp},v1=${digest(secret, timestamp, body)}`;
}

/**
 * Resolves at the start of a Unix second when the current one is nearly over, so that a
 * timestamp taken now is read in the same second by the server: only for the tests whose
 * subject is the 300-second window, where one second of drift flips the answer.
 */
export async function startOfFreshSecond(): Promise<void> {
  const intoSecond = Date.now() % 1000;
  if (intoSecond < 700) return;
  await new Promise((resolve) => setTimeout(resolve, 1005 - intoSecond));
}
