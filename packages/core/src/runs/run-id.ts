let idMs = -1;
let idPrefix = "";

/**
 * A new UUID for a conversation or a run: version 7 (RFC 9562), 48 bits of Unix
 * milliseconds, then 74 random bits. Ids made close in time sort close together, so a new
 * conversation's and run's rows go to the last page of each index instead of a random one:
 * a batch of runs then writes a few shared pages where random (version 4) ids wrote a page
 * per index per run, the larger part of a run's write on SQLite (docs/benchmarks.md,
 * "Time-ordered ids"). The random bits come from `crypto.randomUUID()`, so they are as hard
 * to guess as a version 4 id's, less the 48 bits of time: an id says when it was made.
 */
export function newRecordId(): string {
  const now = Date.now();
  if (now !== idMs) {
    idMs = now;
    const hex = now.toString(16).padStart(12, "0");
    idPrefix = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-7`;
  }
  // randomUUID() is `xxxxxxxx-xxxx-4xxx-Vxxx-xxxxxxxxxxxx`: its version digit is at 14, and
  // what follows it (random bits, the variant) is kept whole.
  return flat(idPrefix + crypto.randomUUID().slice(15));
}

/** A new random UUID (version 4), as one flat string: see {@link flat}. */
export function newUuid(): string {
  return flat(crypto.randomUUID());
}

/**
 * `id` (lowercase hexadecimal and dashes) as one flat string. V8 keeps a string built by `+`
 * as a tree of its pieces until something reads it whole, and Node's `randomUUID()` is built
 * of 20 pieces: about 600 bytes, against 56 flat, for as long as a run keeps the id. Lowering
 * a string that is already lowercase changes nothing but returns it flattened
 * (docs/benchmarks.md, "Memory per open stream").
 */
function flat(id: string): string {
  return id.toLowerCase();
}
