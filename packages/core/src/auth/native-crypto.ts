/**
 * The runtime's `node:crypto`, when it offers one without an import (Node 20.16 and later,
 * Bun, Deno: `process.getBuiltinModule`), else undefined.
 *
 * Why: Web Crypto answers every digest, HMAC and AES-GCM call asynchronously through a
 * thread pool, and `node:crypto` computes the same functions synchronously, many times
 * faster (see docs/benchmarks.md, "Why the code looks like this").
 * Core stays on Web standards: where this is undefined (Workers, browsers, older Node), Web
 * Crypto is used, and the tests check that both paths agree.
 */
export interface NativeCrypto {
  /**
   * A one-shot digest of a string as UTF-8 (Node 20.12 and later): no hash object, no
   * encoding of the string first; about 3 µs of every key lookup (docs/benchmarks.md, "Why
   * the code looks like this").
   */
  hash?(algorithm: "sha256", data: string, encoding: "hex"): string;
  createHash(algorithm: "sha256"): NativeDigest;
  createHmac(algorithm: "sha256", key: string | Uint8Array): NativeDigest;
  createDecipheriv(algorithm: "aes-256-gcm", key: Uint8Array, iv: Uint8Array): NativeDecipher;
}

interface NativeDigest {
  update(data: string | Uint8Array): NativeDigest;
  digest(encoding: "hex"): string;
}

interface NativeDecipher {
  setAuthTag(tag: Uint8Array): NativeDecipher;
  update(data: Uint8Array): Uint8Array;
  final(): Uint8Array;
}

function load(): NativeCrypto | undefined {
  const process = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process;
  try {
    const module = process?.getBuiltinModule?.("node:crypto") as Partial<NativeCrypto> | undefined;
    if (typeof module?.createHash === "function" && typeof module.createHmac === "function" && typeof module.createDecipheriv === "function") {
      return module as NativeCrypto;
    }
  } catch {
    // A runtime that refuses the module: Web Crypto it is.
  }
  return undefined;
}

/** `node:crypto` where available; see the module comment. */
export const nativeCrypto: NativeCrypto | undefined = load();
