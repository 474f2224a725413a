import { fromHex, toHex, utf8 } from "../auth/encoding.js";

/** Namespace of flow ids (a random UUID, fixed forever). */
const FLOW_NAMESPACE = "6f1c2a57-0d3e-4b8a-9c61-2f5e8b7d4a10";

/** A name-based UUID (version 5): the same flow name gives the same id in every process. */
export async function uuidV5(name: string, namespace: string = FLOW_NAMESPACE): Promise<string> {
  const ns = fromHex(namespace.replace(/-/g, "")) as Uint8Array;
  const nameBytes = utf8(name);
  const input = new Uint8Array(ns.length + nameBytes.length);
  input.set(ns);
  input.set(nameBytes, ns.length);
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-1", input)).slice(0, 16);
  hash[6] = ((hash[6] as number) & 0x0f) | 0x50;
  hash[8] = ((hash[8] as number) & 0x3f) | 0x80;
  const hex = toHex(hash);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
