import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import { NodeRequestHeaders } from "./headers.js";

const raw = ["Host", "127.0.0.1:3000", "Authorization", "Bearer svc_live_abc", "X-Many", "a", "content-type", "application/json", "x-many", "b", "X-Empty", ""];

function both() {
  const web = new Headers();
  for (let i = 0; i < raw.length; i += 2) web.append(raw[i] as string, raw[i + 1] as string);
  return { node: new NodeRequestHeaders({ rawHeaders: raw } as IncomingMessage), web };
}

describe("NodeRequestHeaders", () => {
  it("reads as a Web Headers of the same raw headers would", () => {
    const { node, web } = both();
    for (const name of ["host", "AUTHORIZATION", "x-many", "Content-Type", "x-empty", "origin"]) {
      expect(node.get(name), name).toBe(web.get(name));
      expect(node.has(name), name).toBe(web.has(name));
    }
    expect(node.get("x-many")).toBe("a, b");
    const entries = (headers: { forEach(callback: (value: string, name: string) => void): void }) => {
      const seen: [string, string][] = [];
      headers.forEach((value, name) => {
        seen.push([name, value]);
      });
      return seen;
    };
    expect(entries(node)).toEqual(entries(web));
  });
});
