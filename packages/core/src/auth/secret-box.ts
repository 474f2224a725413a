import { fromBase64Url, fromHex, toBase64Url, utf8 } from "./encoding.js";
import { type NativeCrypto, nativeCrypto } from "./native-crypto.js";

/** Encrypts and decrypts signing secrets and secret settings at rest with AES-256-GCM under a master key. */
export interface SecretBox {
  /** Seals under the current master key. */
  encrypt(plain: string): Promise<string>;
  /** Returns null when neither the current master key nor a fallback key sealed it. */
  decrypt(sealed: string): Promise<string | null>;
  /**
   * Which key sealed `sealed`: the current master key, one of the fallback keys (it should be
   * sealed again under the current one: `service.admin.resealSecrets()`), or none (null).
   */
  sealedUnder(sealed: string): Promise<"current" | "fallback" | null>;
}

const VERSION = "v1";

/** Bytes of the GCM authentication tag that Web Crypto appends to the ciphertext. */
const TAG_BYTES = 16;

/**
 * A {@link SecretBox} keyed by a 32-byte master key written as 64 hex characters
 * (`openssl rand -hex 32`). `fallbacks` are earlier (or upcoming) master keys that still open
 * what they sealed, tried after the current one, while a rotation reseals under the current
 * key; nothing is sealed under them. Signing secrets are opened on every signed request, so
 * `decrypt` uses node:crypto where available (synchronous, same AES-256-GCM) and Web Crypto
 * elsewhere.
 */
export function createSecretBox(masterKeyHex: string, fallbacks: readonly string[] = []): SecretBox {
  return secretBoxWith(masterKeyHex, nativeCrypto, fallbacks);
}

/** {@link createSecretBox} with node:crypto or, when `native` is undefined, Web Crypto only. */
export function secretBoxWith(masterKeyHex: string, native: NativeCrypto | undefined, fallbacks: readonly string[] = []): SecretBox {
  const current = sealingKey(masterKeyHex, native, "The master key (CHANNELKIT_SECRET_KEY)");
  const others = fallbacks
    .map((hex, i) => sealingKey(hex, native, `Fallback master key ${i + 1} (CHANNELKIT_SECRET_KEY_FALLBACKS)`))
    .filter((key, i, all) => key.id !== current.id && all.findIndex((other) => other.id === key.id) === i);
  const keys = [current, ...others];
  return {
    encrypt: current.encrypt,
    async decrypt(sealed) {
      for (const key of keys) {
        const plain = await key.decrypt(sealed);
        if (plain !== null) return plain;
      }
      return null;
    },
    async sealedUnder(sealed) {
      for (const key of keys) {
        if ((await key.decrypt(sealed)) !== null) return key === current ? "current" : "fallback";
      }
      return null;
    },
  };
}

/** One master key: seals and opens under it alone. `id` tells two spellings of one key apart from two keys. */
interface SealingKey {
  id: string;
  encrypt(plain: string): Promise<string>;
  decrypt(sealed: string): Promise<string | null>;
}

function sealingKey(masterKeyHex: string, native: NativeCrypto | undefined, name: string): SealingKey {
  const raw = fromHex(masterKeyHex.trim());
  if (raw?.length !== 32) {
    throw new TypeError(`${name} must be 32 bytes written as 64 hexadecimal characters.`);
  }
  const key = crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]);
  return {
    id: masterKeyHex.trim().toLowerCase(),
    async encrypt(plain) {
      const iv = crypto.getRandomValues(new Uint8Array(12));
      const sealed = await crypto.subtle.encrypt({ name: "AES-GCM", iv }, await key, utf8(plain));
      return `${VERSION}:${toBase64Url(iv)}:${toBase64Url(new Uint8Array(sealed))}`;
    },
    async decrypt(sealed) {
      const [version, iv, data] = sealed.split(":");
      if (version !== VERSION || !iv || !data) return null;
      if (native) {
        try {
          const bytes = fromBase64Url(data);
          if (bytes.length < TAG_BYTES) return null;
          const decipher = native.createDecipheriv("aes-256-gcm", raw, fromBase64Url(iv));
          decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
          const head = decipher.update(bytes.subarray(0, bytes.length - TAG_BYTES));
          const tail = decipher.final();
          const plain = new Uint8Array(head.length + tail.length);
          plain.set(head, 0);
          plain.set(tail, head.length);
          return new TextDecoder().decode(plain);
        } catch {
          return null;
        }
      }
      try {
        const plain = await crypto.subtle.decrypt({ name: "AES-GCM", iv: fromBase64Url(iv) }, await key, fromBase64Url(data));
        return new TextDecoder().decode(plain);
      } catch {
        return null;
      }
    },
  };
}

/**
 * The master key used when none is configured outside production. It is public, so secrets
 * sealed with it are not protected: the service warns loudly when it falls back to it.
 */
export const DEVELOPMENT_MASTER_KEY = "00000000000000000000000000000000000000000000000000000000000000de";
