import { fromBase64Url, fromHex, toBase64Url, utf8 } from "./encoding.js";

/** Encrypts and decrypts signing secrets at rest with AES-256-GCM under a master key. */
export interface SecretBox {
  encrypt(plain: string): Promise<string>;
  /** Returns null when the ciphertext was not made under this master key. */
  decrypt(sealed: string): Promise<string | null>;
}

const VERSION = "v1";

/**
 * A {@link SecretBox} keyed by a 32-byte master key written as 64 hex characters
 * (`openssl rand -hex 32`).
 */
export function createSecretBox(masterKeyHex: string): SecretBox {
  const raw = fromHex(masterKeyHex.trim());
  if (!raw || raw.length !== 32) {
    throw new TypeError("The master key (CHANNELKIT_SECRET_KEY) must be 32 bytes written as 64 hexadecimal characters.");
  }
  const key = crypto.subtle.importKey("raw", raw, "AES-GCM", false, ["encrypt", "decrypt"]);
  return {
    async encrypt(plain) {
      const iv = crypto.getRandomValues(new Uint8Array(12));
      const sealed = await crypto.subtle.encrypt({ name: "AES-GCM", iv }, await key, utf8(plain));
      return `${VERSION}:${toBase64Url(iv)}:${toBase64Url(new Uint8Array(sealed))}`;
    },
    async decrypt(sealed) {
      const [version, iv, data] = sealed.split(":");
      if (version !== VERSION || !iv || !data) return null;
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
