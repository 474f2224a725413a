/**
 * The tables a request's authentication reads (its key, its channel) and the one whose
 * deletion cascades into them. A statement of this connection that writes SQL naming one of
 * them moves the {@link ChangeWatch}; a foreign key's cascade starts from a statement that
 * names its parent, so it is seen too.
 */
const WATCHED_TABLES = /\b(?:api_keys|channels|tenants)\b/i;

/** Whether the SQL of a writing statement names a table a {@link ChangeWatch} watches. */
export function writesWatchedTables(sql: string): boolean {
  return WATCHED_TABLES.test(sql);
}

/**
 * Tells whether the keys, channels and tenants of a SQLite database may have changed since
 * a stamp, without reading them: SQLite's `data_version` moves when another connection (another
 * process, another storage on the file) commits, and this connection's own writes to those
 * tables are told with {@link changed}. A cache of what authentication reads is then valid
 * while the stamp it was filled under is the current one (see {@link WatchedCache}).
 *
 * Why: the key lookup was 16 µs of a stream's first event at rest, as much as the claim's
 * `INSERT`s, and `data_version` costs a third of it (docs/benchmarks.md, "The key lookup
 * kept while nothing changed").
 */
export class ChangeWatch {
  readonly #version: () => unknown;
  #seen: unknown = undefined;
  #stamp = 0;
  /** How many reads in a row found the version moved. */
  #movedInARow = 0;
  /** How many more stamps are asked for without reading the version (see {@link stamp}). */
  #unread = 0;

  /**
   * @param version reads the database's `data_version`, or answers undefined when it cannot
   *   be read now (a transaction holds the connection, the read failed).
   */
  constructor(version: () => unknown) {
    this.#version = version;
  }

  /**
   * The stamp now: it differs from every earlier one when something watched may have
   * changed since. Undefined when that cannot be told now, or is not worth telling (another
   * connection committed before each of the last reads): read the database.
   */
  stamp(): number | undefined {
    if (this.#unread > 0) {
      this.#unread--;
      return undefined;
    }
    const version = this.#version();
    if (version === undefined) return undefined;
    if (version === this.#seen) {
      this.#movedInARow = 0;
      return this.#stamp;
    }
    this.#seen = version;
    this.#stamp++;
    // Another connection commits between most lookups (another instance under load): every
    // lookup would read the rows anyway, and the version read before it cost two instances
    // about 4% more CPU a request. The next lookups read the rows without it, then it is
    // tried again (docs/benchmarks.md, "The key lookup kept while nothing changed").
    if (++this.#movedInARow === MOVED_IN_A_ROW) {
      this.#movedInARow = 0;
      this.#unread = UNREAD_AFTER_MOVES;
    }
    return this.#stamp;
  }

  /** The stamp as last moved, without reading the database's version. */
  get last(): number {
    return this.#stamp;
  }

  /** This connection ran a statement that may change a watched table. */
  changed(): void {
    this.#stamp++;
  }
}

/** After this many reads in a row that found the version moved, {@link UNREAD_AFTER_MOVES} stamps are not read. */
const MOVED_IN_A_ROW = 3;
const UNREAD_AFTER_MOVES = 100;

/** How many records a {@link WatchedCache} keeps: a host's keys in use at once, with room. */
const CACHE_SIZE = 1024;

/**
 * Records read by one lookup (a key by its hash, a channel by its client id), kept while the
 * {@link ChangeWatch} says nothing they were read from changed. Emptied when the stamp moves;
 * an absent record (an unknown key) is never kept, so guessing keys fills nothing; the least
 * recently kept record goes when it is full. A record is handed out as read: shared, never
 * to be changed.
 */
export class WatchedCache<T> {
  readonly #watch: ChangeWatch;
  readonly #records = new Map<string, T>();
  #stamp = -1;

  constructor(watch: ChangeWatch) {
    this.#watch = watch;
  }

  /** The record of `id`: kept, or read by `lookup` and kept when nothing moved meanwhile. */
  async find(id: string, lookup: (id: string) => Promise<T | null>): Promise<T | null> {
    const stamp = this.#watch.stamp();
    if (stamp === undefined) return lookup(id);
    if (stamp === this.#stamp) {
      const kept = this.#records.get(id);
      if (kept !== undefined) return kept;
    } else {
      this.#records.clear();
      this.#stamp = stamp;
    }
    const found = await lookup(id);
    // A lookup that waited (behind a transaction of Kysely's driver) may have read rows that
    // a write of this connection changed meanwhile: kept only when nothing moved.
    if (found !== null && this.#watch.last === stamp && this.#stamp === stamp) {
      if (this.#records.size >= CACHE_SIZE) this.#records.delete(this.#records.keys().next().value as string);
      this.#records.set(id, found);
    }
    return found;
  }
}
