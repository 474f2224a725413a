import type { ChannelMode, Environment } from "../storage/types.js";
import { sha256Hex, timingSafeEqual } from "./encoding.js";

/** The three key kinds of the contract. */
export const KEY_PREFIXES = ["svc_live_", "svc_test_", "svc_pub_"] as const;
/** A key's prefix, which tells its kind. */
type KeyPrefix = (typeof KEY_PREFIXES)[number];

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/** 43 base62 characters carry 256 bits, the entropy of 32 random bytes. */
const SECRET_LENGTH = 43;
const KEY_PATTERN = /^(svc_live_|svc_test_|svc_pub_)([A-Za-z0-9_-]{40,256})$/;

/** The prefix a new key gets on a channel of this mode and environment. */
export function prefixFor(mode: ChannelMode, environment: Environment): KeyPrefix {
  if (mode === "public") return "svc_pub_";
  return environment === "prod" ? "svc_live_" : "svc_test_";
}

/** True when a key of this prefix may be presented on a channel of this mode. */
export function prefixMatchesMode(prefix: string, mode: ChannelMode): boolean {
  return (prefix === "svc_pub_") === (mode === "public");
}

/** Random base62 string of `length` characters, without modulo bias. */
export function randomBase62(length: number): string {
  let out = "";
  while (out.length < length) {
    for (const byte of crypto.getRandomValues(new Uint8Array(length * 2))) {
      // 248 = 62 * 4: bytes above it would favour the first characters.
      if (byte < 248 && out.length < length) out += BASE62[byte % 62];
    }
  }
  return out;
}

/** A new API key: the prefix, then 256 random bits in base62. */
export function generateApiKey(prefix: KeyPrefix): string {
  return prefix + randomBase62(SECRET_LENGTH);
}

/** Splits a presented key into prefix and secret, or null when it cannot be a key. */
export function parseApiKey(key: string): { prefix: KeyPrefix; secret: string } | null {
  const match = KEY_PATTERN.exec(key);
  if (!match) return null;
  return { prefix: match[1] as KeyPrefix, secret: match[2] as string };
}

/** What is stored for a key: its SHA-256 hash, as lowercase hex. */
export function hashApiKey(key: string): Promise<string> {
  return sha256Hex(key);
}

/** Constant-time comparison of two key hashes. */
export function hashesEqual(a: string, b: string): boolean {
  return timingSafeEqual(a, b);
}

/** The masked form shown to people: `svc_live_****a1b2`. */
export function apiKeyHint(key: string): string {
  const parsed = parseApiKey(key);
  const prefix = parsed?.prefix ?? "";
  return `${prefix}****${key.slice(-4)}`;
}
