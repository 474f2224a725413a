import type { IncomingMessage } from "node:http";
import type { RequestHeaders } from "@channelkit/core/adapter";

/**
 * A Node request's headers as a channel service reads them, from the raw headers Node
 * received, without a Web `Headers` (whose validation of every name and value costs more
 * on Node 20 than the few lookups a request makes). Values of a header sent several times
 * are joined by `, `, as `Headers` does.
 */
export class NodeRequestHeaders implements RequestHeaders {
  readonly #raw: string[];
  #byName: Map<string, string> | undefined;

  constructor(req: IncomingMessage) {
    this.#raw = req.rawHeaders;
  }

  get(name: string): string | null {
    return this.#map().get(name.toLowerCase()) ?? null;
  }

  has(name: string): boolean {
    return this.#map().has(name.toLowerCase());
  }

  forEach(callback: (value: string, name: string) => void): void {
    for (const [name, value] of [...this.#map()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) callback(value, name);
  }

  #map(): Map<string, string> {
    if (this.#byName) return this.#byName;
    const byName = new Map<string, string>();
    const raw = this.#raw;
    for (let i = 0; i < raw.length; i += 2) {
      const name = (raw[i] as string).toLowerCase();
      const value = raw[i + 1] as string;
      const seen = byName.get(name);
      byName.set(name, seen === undefined ? value : `${seen}, ${value}`);
    }
    this.#byName = byName;
    return byName;
  }
}
