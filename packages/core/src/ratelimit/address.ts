/** How many proxies in front of the service are trusted to say who the client is (see `trustProxy`). */
export type TrustProxy = boolean | number;

/** The hops `trustProxy` trusts: `true` is one. */
export function trustedHops(trustProxy: TrustProxy | undefined): number {
  if (trustProxy === true) return 1;
  if (typeof trustProxy === "number" && Number.isInteger(trustProxy) && trustProxy >= 0) return trustProxy;
  if (trustProxy === undefined || trustProxy === false) return 0;
  throw new TypeError("channelkit: trustProxy must be true, false or a number of proxies (a whole number, 0 or more)");
}

/** An address as `X-Forwarded-For` lists it: IPv4, IPv6, or an obfuscated token; nothing with spaces or quotes. */
const ADDRESS = /^[0-9A-Za-z:._\-[\]%]{1,64}$/;

/**
 * The client's address: the socket's peer, or, behind `hops` trusted proxies, the address the
 * farthest of them saw, which is `X-Forwarded-For`'s `hops`-th entry from the right. Entries
 * further left were written by the client itself and prove nothing: trusting more hops than
 * there are proxies lets any client pick its address.
 */
export function clientAddress(socketAddress: string | undefined, forwardedFor: string | null, hops: number): string | undefined {
  if (hops === 0 || forwardedFor === null) return socketAddress;
  const entries = forwardedFor.split(",");
  // Fewer entries than proxies: the farthest proxy is the client's own first hop.
  const entry = entries[Math.max(0, entries.length - hops)]?.trim() ?? "";
  return ADDRESS.test(entry) ? entry : socketAddress;
}
