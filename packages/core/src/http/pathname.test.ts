import { describe, expect, it } from "vitest";
import { pathnameOf, pathWithin } from "./pathname.js";

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

describe("pathWithin", () => {
  it("gives the route path of a path under the base", () => {
    expect(pathWithin("/chat/public/v1/api/execute", "/chat")).toBe("/public/v1/api/execute");
    expect(pathWithin("/chat/ping", "/chat")).toBe("/ping");
    expect(pathWithin("/chat/", "/chat")).toBe("/");
    expect(pathWithin("/chat", "/chat")).toBe("/");
    expect(pathWithin("/chat//ping", "/chat")).toBe("//ping");
    expect(pathWithin("/a/b/c", "/a/b")).toBe("/c");
  });

  it("ends the base at a path-segment boundary", () => {
    for (const path of ["/chatping", "/chat-x/ping", "/chat.json", "/chatpublic/v1/api/execute", "/cha", "/", "", "/other/chat/ping", "/Chat/ping"]) {
      expect(pathWithin(path, "/chat"), path).toBeNull();
    }
    expect(pathWithin("/a/bc", "/a/b")).toBeNull();
  });

  it("ignores a trailing slash of the base", () => {
    expect(pathWithin("/chat/ping", "/chat/")).toBe("/ping");
    expect(pathWithin("/chat", "/chat//")).toBe("/");
    expect(pathWithin("/chatping", "/chat/")).toBeNull();
  });

  it("holds every path under an empty base or /", () => {
    for (const base of ["", "/"]) {
      expect(pathWithin("/public/v1/api/execute", base)).toBe("/public/v1/api/execute");
      expect(pathWithin("/", base)).toBe("/");
    }
  });
});
