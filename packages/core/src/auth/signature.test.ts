import { createHmac } from "node:crypto";
import Stripe from "stripe";
import { describe, expect, it } from "vitest";
import { ServiceError } from "../http/errors.js";
import { utf8 } from "./encoding.js";
import { computeSignature, webComputeSignature, parseSignatureHeader, SIGNATURE_TOLERANCE_SECONDS, signRequestBody, verifySignature } from "./signature.js";

const SECRET = "svc_sig_testsecret";
const NOW = 1_700_000_000;
const BODY = '{"payload":"Hello"}';
const HEX_A = "a".repeat(64);
const HEX_B = "0123456789abcdef".repeat(4);

/** The reference digest, computed with node:crypto rather than the code under test. */
function reference(secret: string, timestamp: number | string, body: string | Uint8Array): string {
  return createHmac("sha256", Buffer.from(secret, "utf8"))
    .update(`${timestamp}.`)
    .update(typeof body === "string" ? Buffer.from(body, "utf8") : body)
    .digest("hex");
}

/** The error code `verifySignature` fails with, or null when it passes. */
async function outcome(header: string | null, body: string | Uint8Array = BODY, now = NOW, secret = SECRET) {
  try {
    await verifySignature(header, secret, typeof body === "string" ? utf8(body) : body, now);
    return null;
  } catch (error) {
    expect(error).toBeInstanceOf(ServiceError);
    return (error as ServiceError).code;
  }
}

describe("parseSignatureHeader", () => {
  it("parses a timestamp and one v1 digest", () => {
    expect(parseSignatureHeader(`t=${NOW},v1=${HEX_A}`)).toEqual({ timestamp: String(NOW), signatures: [HEX_A] });
  });

  it("keeps every v1 entry, in order, and tolerates spaces around parts", () => {
    expect(parseSignatureHeader(` t=${NOW} , v1=${HEX_A}, v1=${HEX_B} `)).toEqual({
      timestamp: String(NOW),
      signatures: [HEX_A, HEX_B],
    });
  });

  it("ignores unknown schemes such as v0 or v2, as Stripe does", () => {
    expect(parseSignatureHeader(`t=${NOW},v0=${"f".repeat(64)},v1=${HEX_A},v2=whatever,x=1`)).toEqual({
      timestamp: String(NOW),
      signatures: [HEX_A],
    });
  });

  it("accepts the parts in any order", () => {
    expect(parseSignatureHeader(`v1=${HEX_A},t=${NOW}`)).toEqual({ timestamp: String(NOW), signatures: [HEX_A] });
  });

  it("rejects a header without t", () => {
    expect(parseSignatureHeader(`v1=${HEX_A}`)).toBeNull();
  });

  it("rejects a header without any v1", () => {
    expect(parseSignatureHeader(`t=${NOW}`)).toBeNull();
    expect(parseSignatureHeader(`t=${NOW},v0=${HEX_A}`)).toBeNull();
  });

  it.each([
    "0x6553f100",
    "1.7e9",
    "-1700000000",
    "+1700000000",
    "17000000 00",
    "",
    "abc",
    "1".repeat(16),
  ])("rejects the non-decimal or absurd timestamp %j", (t) => {
    expect(parseSignatureHeader(`t=${t},v1=${HEX_A}`)).toBeNull();
  });

  it("rejects two timestamps", () => {
    expect(parseSignatureHeader(`t=${NOW},t=${NOW + 1},v1=${HEX_A}`)).toBeNull();
  });

  it("leaves out a v1 that is not a digest, keeping the others", () => {
    expect(parseSignatureHeader(`t=${NOW},v1=00,v1=${HEX_A},v1=${"g".repeat(64)},v1=,v1=${HEX_B.toUpperCase()}`)).toEqual({
      timestamp: String(NOW),
      signatures: [HEX_A],
    });
  });

  it("rejects a header whose only v1 entries are uppercase hex, short or non-hex digests", () => {
    expect(parseSignatureHeader(`t=${NOW},v1=${HEX_A.toUpperCase()}`)).toBeNull();
    expect(parseSignatureHeader(`t=${NOW},v1=${"A".repeat(64)}`)).toBeNull();
    expect(parseSignatureHeader(`t=${NOW},v1=${"a".repeat(63)}`)).toBeNull();
    expect(parseSignatureHeader(`t=${NOW},v1=${"a".repeat(65)}`)).toBeNull();
    expect(parseSignatureHeader(`t=${NOW},v1=${"g".repeat(64)}`)).toBeNull();
  });

  it("rejects empty and shapeless headers", () => {
    expect(parseSignatureHeader("")).toBeNull();
    expect(parseSignatureHeader(",")).toBeNull();
    expect(parseSignatureHeader("garbage")).toBeNull();
    expect(parseSignatureHeader(`t=${NOW};v1=${HEX_A}`)).toBeNull();
  });
});

describe("computeSignature", () => {
  it("is the lowercase hex HMAC-SHA256 of `<t>.<raw bytes>` keyed with the secret's UTF-8 bytes", async () => {
    const body = new Uint8Array([0x7b, 0xff, 0x00, 0xc3, 0x28, 0x7d]); // not valid UTF-8 on purpose
    expect(await computeSignature(SECRET, String(NOW), body)).toBe(reference(SECRET, NOW, body));
    expect(await computeSignature("clé-ü", String(NOW), utf8(BODY))).toBe(reference("clé-ü", NOW, BODY));
  });

  it("gives the same digest on Web Crypto, the path of runtimes without node:crypto", async () => {
    const body = new Uint8Array([0x7b, 0xff, 0x00, 0xc3, 0x28, 0x7d]);
    expect(await webComputeSignature(SECRET, String(NOW), body)).toBe(reference(SECRET, NOW, body));
    expect(await webComputeSignature("clé-ü", String(NOW), utf8(BODY))).toBe(reference("clé-ü", NOW, BODY));
  });
});

describe("signRequestBody", () => {
  it("builds a `t=..,v1=..` header that verifySignature accepts", async () => {
    const header = await signRequestBody(SECRET, BODY, NOW);
    expect(header).toBe(`t=${NOW},v1=${reference(SECRET, NOW, BODY)}`);
    expect(await outcome(header)).toBeNull();
  });

  it("signs bytes as given and strings as UTF-8", async () => {
    const text = '{"payload":"héllo 👋"}';
    expect(await signRequestBody(SECRET, text, NOW)).toBe(await signRequestBody(SECRET, utf8(text), NOW));
    expect(await outcome(await signRequestBody(SECRET, text, NOW), text)).toBeNull();
  });

  it("defaults the timestamp to now", async () => {
    const before = Math.floor(Date.now() / 1000);
    const header = await signRequestBody(SECRET, BODY);
    const t = Number(parseSignatureHeader(header)?.timestamp);
    expect(t).toBeGreaterThanOrEqual(before);
    expect(t).toBeLessThanOrEqual(Math.floor(Date.now() / 1000));
    await expect(verifySignature(header, SECRET, utf8(BODY))).resolves.toBeUndefined();
  });
});

describe("verifySignature", () => {
  it("requires the header", async () => {
    expect(await outcome(null)).toBe("signature_required");
  });

  it("treats an empty or malformed header as invalid", async () => {
    expect(await outcome("")).toBe("invalid_signature");
    expect(await outcome(`t=${NOW}`)).toBe("invalid_signature");
    expect(await outcome(`t=${NOW},v1=${reference(SECRET, NOW, BODY).toUpperCase()}`)).toBe("invalid_signature");
  });

  it("rejects a wrong digest, a wrong secret and a changed body", async () => {
    const header = await signRequestBody(SECRET, BODY, NOW);
    expect(await outcome(`t=${NOW},v1=${HEX_A}`)).toBe("invalid_signature");
    expect(await outcome(header, BODY, NOW, `${SECRET}x`)).toBe("invalid_signature");
    // Same JSON value, different bytes: spacing counts.
    expect(await outcome(header, '{"payload": "Hello"}')).toBe("invalid_signature");
    expect(await outcome(header, `${BODY}\n`)).toBe("invalid_signature");
  });

  it("binds the timestamp into the digest: changing t invalidates it", async () => {
    const digest = reference(SECRET, NOW, BODY);
    expect(await outcome(`t=${NOW + 1},v1=${digest}`)).toBe("invalid_signature");
  });

  it("checks the digest before the window: stale and wrong is invalid, stale and genuine is expired", async () => {
    const stale = NOW - SIGNATURE_TOLERANCE_SECONDS - 1;
    expect(await outcome(`t=${stale},v1=${HEX_A}`)).toBe("invalid_signature");
    expect(await outcome(await signRequestBody(SECRET, BODY, stale))).toBe("signature_expired");
  });

  it("accepts exactly ±300 s and rejects one second beyond, either side", async () => {
    expect(SIGNATURE_TOLERANCE_SECONDS).toBe(300);
    expect(await outcome(await signRequestBody(SECRET, BODY, NOW - 300))).toBeNull();
    expect(await outcome(await signRequestBody(SECRET, BODY, NOW + 300))).toBeNull();
    expect(await outcome(await signRequestBody(SECRET, BODY, NOW - 301))).toBe("signature_expired");
    expect(await outcome(await signRequestBody(SECRET, BODY, NOW + 301))).toBe("signature_expired");
  });

  it("passes when any of several v1 digests matches, wherever it is", async () => {
    const good = reference(SECRET, NOW, BODY);
    expect(await outcome(`t=${NOW},v1=${good},v1=${HEX_A}`)).toBeNull();
    expect(await outcome(`t=${NOW},v1=${HEX_A},v1=${HEX_B},v1=${good}`)).toBeNull();
    expect(await outcome(`t=${NOW},v1=${HEX_A},v1=${HEX_B}`)).toBe("invalid_signature");
  });

  it("passes when one v1 matches beside entries that are not digests at all", async () => {
    const good = reference(SECRET, NOW, BODY);
    expect(await outcome(`t=${NOW},v1=00,v1=${good}`)).toBeNull();
    expect(await outcome(`t=${NOW},v1=${good},v1=zz`)).toBeNull();
    expect(await outcome(`t=${NOW},v1=,v1=${good.toUpperCase()},v1=${good}`)).toBeNull();
    expect(await outcome(`t=${NOW},v1=00,v1=${good.slice(1)}`)).toBe("invalid_signature");
  });

  it("verifies over raw bytes that are not valid UTF-8", async () => {
    const body = new Uint8Array([0xff, 0xfe, 0x80, 0x00]);
    const header = `t=${NOW},v1=${reference(SECRET, NOW, body)}`;
    expect(await outcome(header, body)).toBeNull();
    expect(await outcome(header, new Uint8Array([0xff, 0xfe, 0x80, 0x01]))).toBe("invalid_signature");
  });
});

describe("compatibility with stripe-node", () => {
  const stripe = new Stripe("sk_test_x");
  const payload = JSON.stringify({ payload: "Bonjour, ça va ? 🚀", metadata: { n: 1 } });

  it("accepts a header made by stripe.webhooks.generateTestHeaderString", async () => {
    const header = stripe.webhooks.generateTestHeaderString({ payload, secret: SECRET, timestamp: NOW });
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(await outcome(header, payload)).toBeNull();
    // And stays strict on the same header: another body or too late.
    expect(await outcome(header, `${payload} `)).toBe("invalid_signature");
    expect(await outcome(header, payload, NOW + 301)).toBe("signature_expired");
  });

  it("accepts a Stripe header with the current time by default", async () => {
    const header = stripe.webhooks.generateTestHeaderString({ payload, secret: SECRET });
    await expect(verifySignature(header, SECRET, utf8(payload))).resolves.toBeUndefined();
  });

  it("agrees with Stripe's own verifier on headers with several v1 entries, some not digests", async () => {
    const good = await computeSignature(SECRET, String(NOW), utf8(payload));
    const stripeAccepts = (header: string) => {
      try {
        return stripe.webhooks.signature?.verifyHeader(payload, header, SECRET, 300, undefined, NOW) === true;
      } catch {
        return false;
      }
    };
    for (const header of [
      `t=${NOW},v1=00,v1=${good}`,
      `t=${NOW},v1=${good},v1=not-hex`,
      `t=${NOW},v1=${good.toUpperCase()},v1=${good}`,
      `t=${NOW},v1=00,v1=${HEX_A}`,
      `t=${NOW},v1=${good.toUpperCase()}`,
    ]) {
      expect(await outcome(header, payload), header).toBe(stripeAccepts(header) ? null : "invalid_signature");
    }
    expect(stripeAccepts(`t=${NOW},v1=00,v1=${good}`)).toBe(true);
  });

  it("produces headers that Stripe's own verifier accepts", async () => {
    const header = await signRequestBody(SECRET, payload, NOW);
    expect(stripe.webhooks.signature?.verifyHeader(payload, header, SECRET, 300, undefined, NOW)).toBe(true);
  });
});
