import { z } from "zod";
import { ServiceError } from "../http/errors.js";
import { isReplyStream, type Reply, type ReplyChunk, type ReplyStream } from "../http/reply.js";
import type { KeyWithChannel } from "../storage/types.js";

/**
 * Caps on the answers that stay open (event streams, streamed runs) in this process, each a
 * number of streams open at once or `false` for none. Counted per process: they bound the
 * connections, and so the file descriptors, that one key or one address holds in it.
 */
export interface StreamLimits {
  /**
   * Streams open at once per API key, publishable or server, and per agent on the inbox feed
   * (the admin token's subject, in its tenant) (default 1000). A publishable key is shared by
   * every visitor of its pages: this is their total, per process.
   */
  perKey?: number | false;
  /**
   * Streams open at once per client address (see `trustProxy`), for requests with a
   * publishable key, the one key anybody can read from a page (default 100). Server keys and
   * agents are not counted per address: a backend serving its users through one key sends
   * all their streams from its own address.
   */
  perAddress?: number | false;
}

/** What each cap is when the host says nothing: far above what a page or a backend holds open, far below a process's file descriptors. */
export const DEFAULT_STREAM_LIMITS: Readonly<Required<StreamLimits>> = Object.freeze({ perKey: 1000, perAddress: 100 });

const cap = z.union([z.number().int().min(1).max(1e9), z.literal(false)], "a stream cap is a whole number from 1 to 1000000000, or false for none");

/** The service's `streamLimits` option, checked at start-up. */
export const streamLimitsSchema = z.strictObject({ perKey: cap.optional(), perAddress: cap.optional() });

/** When a refused client may try again: streams end on their own time, so this is a pace, not a promise. */
const RETRY_AFTER_SECONDS = 5;

/** What the caps read of a request: where it comes from (the rate limiter's `addressOf`). */
interface FromClient {
  readonly headers: { get(name: string): string | null };
  readonly clientAddress?: string | undefined;
}
type AddressOf = (request: FromClient) => string | undefined;

/**
 * The streams open in this process, counted per key and per client address. A route that
 * answers a stream opens it through {@link forKey} or {@link forAgent}: past a cap the request
 * is refused with 429 `too_many_streams` before anything is started, else the stream holds
 * its slot until it ends, whatever ends it (its last chunk, a failure, the client leaving,
 * the service closing), and an answer that is not a stream gives it back at once.
 */
export class OpenStreams {
  readonly #perKey: number;
  readonly #perAddress: number;
  readonly #addressOf: AddressOf;
  readonly #byKey = new Map<string, number>();
  readonly #byAddress = new Map<string, number>();

  /** @param limits null when the caps are off. */
  constructor(limits: Readonly<Required<StreamLimits>> | null, addressOf: AddressOf) {
    this.#perKey = limits === null || limits.perKey === false ? Number.POSITIVE_INFINITY : limits.perKey;
    this.#perAddress = limits === null || limits.perAddress === false ? Number.POSITIVE_INFINITY : limits.perAddress;
    this.#addressOf = addressOf;
  }

  /** Whether a cap counts per client address: the adapter is then asked to tell every request's. */
  get countsAddresses(): boolean {
    return this.#perAddress !== Number.POSITIVE_INFINITY;
  }

  /** The streams open now for an API key (by its id), or for an agent (`agent`'s key). */
  openFor(key: string): number {
    return this.#byKey.get(key) ?? 0;
  }

  /** `answer`, counted against the caps of the request's key, and of its address for a publishable key. */
  forKey(request: FromClient, { key }: KeyWithChannel, answer: () => Reply | Promise<Reply>): Promise<Reply> {
    const address = key.prefix === "svc_pub_" && this.countsAddresses ? this.#addressOf(request) : undefined;
    return this.#hold(key.id, address, answer);
  }

  /** `answer`, counted against the cap of an agent: the subject of its admin token, in its tenant. */
  forAgent(tenantId: string, subject: string | null, answer: () => Reply | Promise<Reply>): Promise<Reply> {
    return this.#hold(agentKey(tenantId, subject), undefined, answer);
  }

  async #hold(key: string, address: string | undefined, answer: () => Reply | Promise<Reply>): Promise<Reply> {
    if (this.#perKey === Number.POSITIVE_INFINITY && address === undefined) return answer();
    const release = this.#acquire(key, address);
    let reply: Reply;
    try {
      reply = await answer();
    } catch (error) {
      release();
      throw error;
    }
    if (!isReplyStream(reply.body)) {
      release();
      return reply;
    }
    reply.body = new HeldStream(reply.body, release);
    return reply;
  }

  #acquire(key: string, address: string | undefined): () => void {
    const keyed = this.#perKey !== Number.POSITIVE_INFINITY;
    if (keyed && this.openFor(key) >= this.#perKey) throw refusal(this.#perKey, "this key");
    if (address !== undefined && (this.#byAddress.get(address) ?? 0) >= this.#perAddress) throw refusal(this.#perAddress, "this client address");
    if (keyed) increment(this.#byKey, key);
    if (address !== undefined) increment(this.#byAddress, address);
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      if (keyed) decrement(this.#byKey, key);
      if (address !== undefined) decrement(this.#byAddress, address);
    };
  }
}

/** The key an agent's streams count under: subjects are only unique within their identity provider's tenant. */
export function agentKey(tenantId: string, subject: string | null): string {
  return `agent ${tenantId} ${subject ?? ""}`;
}

function refusal(cap: number, counted: string): ServiceError {
  return new ServiceError(
    "too_many_streams",
    `Too many open streams: at most ${cap} at once for ${counted}. Close one (or let one end), then retry in ${RETRY_AFTER_SECONDS} s.`,
    { headers: { "retry-after": String(RETRY_AFTER_SECONDS) } },
  );
}

function increment(counts: Map<string, number>, name: string): void {
  counts.set(name, (counts.get(name) ?? 0) + 1);
}

/** An entry at zero is deleted: the maps hold only what is open, however many keys and addresses came by. */
function decrement(counts: Map<string, number>, name: string): void {
  const left = (counts.get(name) ?? 1) - 1;
  if (left <= 0) counts.delete(name);
  else counts.set(name, left);
}

/** A stream that gives its slot back once, when it ends: its last chunk pulled, a failure, or a cancel. */
class HeldStream implements ReplyStream {
  readonly #inner: ReplyStream;
  #release: (() => void) | null;

  constructor(inner: ReplyStream, release: () => void) {
    this.#inner = inner;
    this.#release = release;
  }

  pull(): ReplyChunk | null | Promise<ReplyChunk | null> {
    let next: ReplyChunk | null | Promise<ReplyChunk | null>;
    try {
      next = this.#inner.pull();
    } catch (error) {
      this.#end();
      throw error;
    }
    if (next === null) this.#end();
    // A chunk that is ready stays synchronous (see ReplyStream.pull): only a wait pays for a `then`.
    else if (next instanceof Promise) return next.then(this.#settled, this.#failed);
    return next;
  }

  cancel(): void {
    this.#end();
    this.#inner.cancel();
  }

  readonly #settled = (chunk: ReplyChunk | null): ReplyChunk | null => {
    if (chunk === null) this.#end();
    return chunk;
  };

  readonly #failed = (error: unknown): never => {
    this.#end();
    throw error;
  };

  #end(): void {
    const release = this.#release;
    this.#release = null;
    release?.();
  }
}
