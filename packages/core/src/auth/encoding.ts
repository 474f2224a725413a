import { nativeCrypto } from "./native-crypto.js";

const encoder = new TextEncoder();

/** UTF-8 bytes of a string. */
export function utf8(value: string): Uint8Array<ArrayBuffer> {
  return encoder.encode(value);
}

/** Lowercase hexadecimal form of bytes. */
export function toHex(bytes: ArrayBuffer | Uint8Array): string {
  const view = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  let out = "";
  for (const byte of view) out += byte.toString(16).padStart(2, "0");
  return out;
}

/** Bytes of a hexadecimal string, or null when it is not one. */
export function fromHex(hex: string): Uint8Array<ArrayBuffer> | null {
  if (hex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(hex)) return null;
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = Number.parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return out;
}

/** base64url without padding. */
export function toBase64Url(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** Bytes of a base64url string (padding optional). Throws on malformed input. */
export function fromBase64Url(value: string): Uint8Array<ArrayBuffer> {
  const binary = atob(value.replace(/-/g, "+").replace(/_/g, "/"));
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

/**
 * Compares two strings in time that depends only on their lengths, so an attacker timing
 * the answer learns nothing about how many leading characters matched.
 */
export function timingSafeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/** SHA-256 of a string's UTF-8 bytes, as lowercase hex (node:crypto where available, else Web Crypto). */
export async function sha256Hex(value: string): Promise<string> {
  if (nativeCrypto?.hash) return nativeCrypto.hash("sha256", value, "hex");
  if (nativeCrypto) return nativeCrypto.createHash("sha256").update(utf8(value)).digest("hex");
  return webSha256Hex(value);
}

/** {@link sha256Hex} on Web Crypto only. */
export async function webSha256Hex(value: string): Promise<string> {
  return toHex(await crypto.subtle.digest("SHA-256", utf8(value)));
}
