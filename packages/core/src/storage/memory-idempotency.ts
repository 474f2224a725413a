import type { IdempotencyClaim, IdempotencyRecord, IdempotencyStore } from "./types.js";

/**
 * Whether a stored key may be claimed at `now` by a request whose body hashes to `hash`:
 * expired and not held by a request still running, or held by a request whose lease lapsed
 * and that sent the same body. The SQL stores write the same condition in their upsert.
 */
export function claimable(record: IdempotencyRecord, hash: string, now: string): boolean {
  const lapsed = record.lockedUntil <= now;
  if (record.state === "done") return record.expiresAt <= now;
  return lapsed && (record.requestHash === hash || record.expiresAt <= now);
}

/** The in-memory {@link IdempotencyStore}, and what deleting a conversation does to it. */
export interface MemoryIdempotencyStore extends IdempotencyStore {
  /** Deletes the records of `channelId` whose stored answer contains `text` (a conversation's id). */
  forgetAnswersNaming(channelId: string, text: string): void;
}

/**
 * The {@link IdempotencyStore} of the in-memory storage: records in a map by channel and
 * key, within one process. `checkOpen` throws once the storage is closed.
 */
export function memoryIdempotencyStore(checkOpen: () => void): MemoryIdempotencyStore {
  const records = new Map<string, IdempotencyRecord>();
  const id = (channelId: string, key: string) => `${channelId}\n${key}`;
  const held = (channelId: string, key: string, token: string) => {
    const record = records.get(id(channelId, key));
    return record && record.token === token && record.state === "running" ? record : undefined;
  };
  const copy = (record: IdempotencyRecord): IdempotencyRecord => ({ ...record, response: record.response ? { ...record.response } : null });
  return {
    forgetAnswersNaming(channelId, text) {
      checkOpen();
      for (const [name, record] of records) {
        if (record.channelId === channelId && record.response?.body.includes(text)) records.delete(name);
      }
    },
    async claim(claim: IdempotencyClaim) {
      checkOpen();
      const existing = records.get(id(claim.channelId, claim.key));
      if (existing && !claimable(existing, claim.requestHash, claim.now)) return copy(existing);
      records.set(id(claim.channelId, claim.key), {
        channelId: claim.channelId,
        key: claim.key,
        requestHash: claim.requestHash,
        token: claim.token,
        state: "running",
        createdAt: claim.now,
        expiresAt: claim.expiresAt,
        lockedUntil: claim.lockedUntil,
        response: null,
      });
      return null;
    },
    async renew(channelId, key, token, lockedUntil) {
      checkOpen();
      const record = held(channelId, key, token);
      if (!record) return false;
      records.set(id(channelId, key), { ...record, lockedUntil });
      return true;
    },
    async complete(channelId, key, token, response) {
      checkOpen();
      const record = held(channelId, key, token);
      if (!record) return false;
      records.set(id(channelId, key), { ...record, state: "done", response: { ...response } });
      return true;
    },
    async release(channelId, key, token) {
      checkOpen();
      if (held(channelId, key, token)) records.delete(id(channelId, key));
    },
    async prune(before) {
      checkOpen();
      for (const [name, record] of records) {
        if (record.expiresAt < before && (record.state === "done" || record.lockedUntil < before)) records.delete(name);
      }
    },
  };
}
