import type { ChannelRecord } from "@channelkit/core";
import type { Selectable } from "kysely";
import { rowToChannel } from "./mappers.js";
import { CHANNEL_COLUMNS, type ChannelsTable } from "./schema.js";

/** Channels whose last row is kept; beyond, the longest kept is let go. */
const MAX_CHANNELS = 1000;

/**
 * The record of a channel's row, made once per version of the row: the request path reads
 * the channel's row on every request (a key lookup, a webhook's `client_id`), as
 * decisions.md's "Consistency" asks, and a row equal, column by column, to the last one
 * read gives back the record made from it, frozen, instead of parsing its JSON columns
 * again. Nothing is cached but the parse: a changed row (another process changed the
 * channel) is seen on the very next request. The runs in flight of a channel then share one
 * record (core's `SharedChannels` finds it identical at once). Measured in
 * docs/benchmarks.md, "A channel's record made once per version of its row".
 */
export class ChannelRecords {
  readonly #kept = new Map<string, { row: Selectable<ChannelsTable>; record: ChannelRecord; version: string | undefined }>();

  /**
   * The record of `row`, the one made before when the channel's row has not changed since.
   * `version` is the row's version where the database gives one (Postgres's `xmin`), for {@link ofVersion}.
   */
  of(row: Selectable<ChannelsTable>, version?: string): ChannelRecord {
    const kept = this.#kept.get(row.id);
    if (kept !== undefined && sameColumns(kept.row, row)) {
      if (version !== undefined) kept.version = version;
      return kept.record;
    }
    const record = frozen(rowToChannel(row));
    if (kept === undefined && this.#kept.size >= MAX_CHANNELS) this.#kept.delete(this.#kept.keys().next().value as string);
    // Only the channel's columns are kept: a key lookup's row carries the key's too.
    const columns = {} as Record<string, unknown>;
    for (const column of CHANNEL_COLUMNS) columns[column] = row[column];
    this.#kept.set(row.id, { row: columns as Selectable<ChannelsTable>, record, version });
    return record;
  }

  /**
   * The record made of the channel's row at `version`, or undefined when the row kept is of
   * another version (or none is): every write of a row gives it a new version, so a record
   * found is the row as it is now, read without its columns.
   */
  ofVersion(id: string, version: string): ChannelRecord | undefined {
    const kept = this.#kept.get(id);
    return kept !== undefined && kept.version === version ? kept.record : undefined;
  }
}

/** Columns are text, numbers or null on both stores (JSON is stored as text), so `===` compares them. */
function sameColumns(a: Selectable<ChannelsTable>, b: Selectable<ChannelsTable>): boolean {
  for (const column of CHANNEL_COLUMNS) if (a[column] !== b[column]) return false;
  return true;
}

/** A shared record must never change under the requests that hold it: a write to it throws. */
function frozen(record: ChannelRecord): ChannelRecord {
  for (const value of Object.values(record)) if (typeof value === "object" && value !== null) deepFreeze(value);
  return Object.freeze(record);
}

function deepFreeze(value: object): void {
  for (const inner of Object.values(value)) if (typeof inner === "object" && inner !== null) deepFreeze(inner);
  Object.freeze(value);
}
