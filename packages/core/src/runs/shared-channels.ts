import type { ChannelRecord } from "../storage/types.js";

/** Channels whose record is kept for sharing; beyond, the longest kept is let go. */
const MAX_CHANNELS = 1000;

/**
 * One record per channel for the runs in flight. A run keeps its channel's record for its
 * whole life, and each request reads a copy of its own from the storage, about 800 bytes
 * with its strings: a run takes instead the record an earlier run of the channel took, when
 * the two are equal, so that the open streams of a channel share one (docs/benchmarks.md,
 * "Memory per open stream"). A record that differs (the channel was changed) replaces the
 * one kept. Records are never changed once read, so sharing one is safe.
 */
export class SharedChannels {
  readonly #records = new Map<string, ChannelRecord>();

  /** The kept record of `channel`'s channel when it equals `channel`, else `channel`, kept from now on. */
  share(channel: ChannelRecord): ChannelRecord {
    const kept = this.#records.get(channel.id);
    if (kept !== undefined && sameValue(kept, channel)) return kept;
    if (kept === undefined && this.#records.size >= MAX_CHANNELS) this.#records.delete(this.#records.keys().next().value as string);
    this.#records.set(channel.id, channel);
    return channel;
  }
}

/** Whether two values made of JSON's types (as records are) are equal, deeply. */
function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  let count = 0;
  for (const key in a) {
    if (!Object.hasOwn(b, key) || !sameValue((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key])) return false;
    count++;
  }
  for (const _ in b) if (--count < 0) return false;
  return count === 0;
}
