import { describe, expect, it } from "vitest";
import { pathnameOf } from "./pathname.js";

describe("pathnameOf", () => {
  it("is the pathname URL parsing gives, for serialized URLs", () => {
    const urls = [
      "http://127.0.0.1:3000/public/v1/api/execute",
      "https://example.com/public/v1/api/conversations/0b0c6f5e-1f1a-4c1e-9d3e-7a9b0c1d2e3f/messages?limit=50&token_budget=0",
      "http://user:p%40ss@host:8080/a/b%20c/?q=1#frag",
      "http://host/a#h?x",
      "http://host?x=1",
      "http://host",
      "http://[::1]:3000/chat/public/v1/api/execute",
      "HTTP://Example.COM/./a/../b/%2e%2E/c",
      "http://host/a\\b/ c",
      "https://xn--bcher-kva.example/ä/ü?ö",
      "http://host:80//double//slash/",
    ];
    for (const raw of urls) {
      const href = new URL(raw).href;
      expect(pathnameOf(href), href).toBe(new URL(href).pathname);
    }
  });

  it("parses what is not an http(s) URL", () => {
    expect(pathnameOf("ws://host/a/b")).toBe("/a/b");
    expect(pathnameOf("file:///tmp/x")).toBe("/tmp/x");
  });
});
