import type { Compilable, CompiledQuery } from "kysely";

const MARK = "\u0000channelkit:parameter:";

/**
 * A query built and compiled once, then run with new parameters. Kysely builds an immutable
 * tree and compiles it for every query, a large part of an execute (see docs/benchmarks.md,
 * "Why the code looks like this"), for SQL text that never changes. `build` receives
 * placeholders where the arguments go, and each compiled parameter is matched back to its
 * placeholder, so the order of parameters is read from the compiled query, never assumed.
 */
export class PreparedQuery<Row> {
  readonly #compiled: CompiledQuery<Row>;
  /** For each compiled parameter, the index of its argument, or -1 for a constant. */
  readonly #sources: number[];

  constructor(arity: number, build: (placeholder: (index: number) => never) => Compilable<Row>) {
    this.#compiled = build((index) => `${MARK}${index}` as never).compile();
    if (this.#compiled.sql.includes(MARK)) throw new Error("channelkit: a placeholder was inlined in the SQL text");
    this.#sources = this.#compiled.parameters.map((value) => (typeof value === "string" && value.startsWith(MARK) ? Number(value.slice(MARK.length)) : -1));
    const used = new Set(this.#sources);
    for (let i = 0; i < arity; i++) if (!used.has(i)) throw new Error(`channelkit: placeholder ${i} is not a parameter of the query`);
  }

  /** The compiled query with these arguments in place of the placeholders. */
  bind(args: readonly unknown[]): CompiledQuery<Row> {
    const { query, queryId, sql, parameters: constants } = this.#compiled;
    const parameters = this.#sources.map((source, i) => (source < 0 ? constants[i] : args[source]));
    // Field by field, not a spread: see docs/benchmarks.md, "Why the code looks like this".
    return { query, queryId, sql, parameters };
  }
}

/** Prepared queries by a key (a shape such as the number of rows), built on first use. */
export class PreparedQueries<Key, Row> {
  readonly #queries = new Map<Key, PreparedQuery<Row>>();
  readonly #make: (key: Key) => PreparedQuery<Row>;
  readonly #limit: number;

  constructor(make: (key: Key) => PreparedQuery<Row>, limit = 64) {
    this.#make = make;
    this.#limit = limit;
  }

  get(key: Key): PreparedQuery<Row> {
    let query = this.#queries.get(key);
    if (!query) {
      query = this.#make(key);
      // Rare shapes (a run producing hundreds of messages) are not kept beyond the limit.
      if (this.#queries.size < this.#limit) this.#queries.set(key, query);
    }
    return query;
  }
}
