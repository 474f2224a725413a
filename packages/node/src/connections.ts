import { readFileSync } from "node:fs";

/** The connection cap of `serve` where the process's open-file limit is unknown or high. */
export const DEFAULT_MAX_CONNECTIONS = 10_000;

/**
 * The open-file limit of this process where the system tells it (Linux), else undefined.
 * Node raises its soft limit to the hard one as it starts: this is what it got.
 */
function openFileLimit(): number | undefined {
  try {
    const found = /^Max open files\s+(\d+)/m.exec(readFileSync("/proc/self/limits", "utf8"));
    return found ? Number(found[1]) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The connections `serve` accepts at once: `option` when given (`false` for no cap), else
 * {@link DEFAULT_MAX_CONNECTIONS}, or three quarters of the open-file limit when that is
 * lower, so that the database, the files and the run's own sockets keep descriptors of their
 * own once every connection is taken (a process out of them fails whatever opens one next).
 */
export function maxConnections(option: number | false | undefined): number | undefined {
  if (option === false) return undefined;
  if (option !== undefined) {
    if (!Number.isInteger(option) || option < 1) {
      throw new TypeError(`channelkit: serve's maxConnections is a whole number of connections, 1 or more, or false for no cap, not ${String(option)}`);
    }
    return option;
  }
  const limit = openFileLimit();
  return limit === undefined ? DEFAULT_MAX_CONNECTIONS : Math.max(16, Math.min(DEFAULT_MAX_CONNECTIONS, Math.floor((limit * 3) / 4)));
}
