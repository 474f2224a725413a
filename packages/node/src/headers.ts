import type { IncomingMessage } from "node:http";
import type { RequestHeaders } from "@channelkit/core/adapter";

/**
 * A Node request's headers as a channel service reads them, from the raw headers Node
 * received, without a Web `Headers` (whose validation of every name and value costs more
 * on Node 20 than the few lookups a request makes). Values of a header sent several times
 * are joined by `, `, as `Headers` does. A lookup reads the raw headers (a request makes a
 * few) rather than a map of them, which a streamed run would keep for as long as it is
 * open (docs/benchmarks.md, "Memory per open stream").
 */
export class NodeRequestHeaders implements RequestHeaders {
  readonly #raw: string[];

  constructor(req: IncomingMessage) {
    this.#raw = req.rawHeaders;
  }

  get(name: string): string | null {
    const wanted = name.toLowerCase();
    const raw = this.#raw;
    let value: string | null = null;
    for (let i = 0; i < raw.length; i += 2) {
      if (!sameName(raw[i] as string, wanted)) continue;
      value = value === null ? (raw[i + 1] as string) : `${value}, ${raw[i + 1]}`;
    }
    return value;
  }

  has(name: string): boolean {
    const wanted = name.toLowerCase();
    const raw = this.#raw;
    for (let i = 0; i < raw.length; i += 2) if (sameName(raw[i] as string, wanted)) return true;
    return false;
  }

  forEach(callback: (value: string, name: string) => void): void {
    const byName = new Map<string, string>();
    const raw = this.#raw;
    for (let i = 0; i < raw.length; i += 2) {
      const name = (raw[i] as string).toLowerCase();
      const value = raw[i + 1] as string;
      const seen = byName.get(name);
      byName.set(name, seen === undefined ? value : `${seen}, ${value}`);
    }
    for (const [name, value] of [...byName].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) callback(value, name);
  }
}

/** Whether the raw header name `name` is `lower`, which is lower case. */
function sameName(name: string, lower: string): boolean {
  return name.length === lower.length && (name === lower || name.toLowerCase() === lower);
}
