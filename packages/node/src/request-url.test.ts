import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { requestUrl } from "./request.js";

/** `new URL`, or undefined where it throws (`URL.canParse` is wrong on Node 20 once hot: see the last test). */
function parse(input: string, base?: string): URL | undefined {
  try {
    return new URL(input, base);
  } catch {
    return undefined;
  }
}

/** The URL as it was built before the fast path: the URL parser's answer, always. */
function parsed(host: string | undefined, target: string): string {
  const base = host !== undefined && parse(`http://${host}`) ? `http://${host}` : "http://localhost";
  return (parse(target, base) ?? new URL("/", base)).href;
}

/** Runs `body` counting the URLs it parses. */
function countingParses<T>(body: (count: () => number) => T): T {
  const Original = globalThis.URL;
  let parses = 0;
  globalThis.URL = class extends Original {
    constructor(...args: ConstructorParameters<typeof URL>) {
      parses++;
      super(...args);
    }
  } as typeof URL;
  try {
    return body(() => parses);
  } finally {
    globalThis.URL = Original;
  }
}

const url = (host: string | undefined, target: string) => requestUrl({ headers: host === undefined ? {} : { host }, url: target }, undefined, {});

const pick = (chars: string) => fc.constantFrom(...chars.split(""));
const label = fc.stringMatching(/^[a-z0-9-]{1,12}$/);
const ipv4 = fc.tuple(fc.nat(300), fc.nat(300), fc.nat(300), fc.nat(300)).map((parts) => parts.join("."));
const octetish = fc.oneof(fc.nat(300).map(String), fc.stringMatching(/^0[0-9]{1,3}$/), fc.stringMatching(/^0x[0-9a-f]{1,3}$/));
const port = fc.oneof(
  fc.constant(""),
  fc.constantFrom(":80", ":0", ":00", ":080", ":65535", ":65536", ":99999", ":", ":3000"),
  fc.nat(70000).map((n) => `:${n}`),
);
/** Hosts near the edges: numeric labels, IPv4 forms, ports, `xn--`, upper case, stray characters. */
/** Hosts and paths mostly plain, with a few characters the fast path must refuse. */
const plainHost = fc.oneof(
  fc.tuple(fc.array(label, { maxLength: 3 }), fc.stringMatching(/^[a-z][a-z0-9-]{0,10}$/), port).map(([labels, last, p]) => [...labels, last].join(".") + p),
  fc.tuple(ipv4, port).map(([ip, p]) => `${ip}${p}`),
);
const plainTarget = fc
  .array(fc.array(pick("abcXYZ019-._~!$&()*+,;=:@%?"), { maxLength: 8 }), { maxLength: 5 })
  .map((segments) => `/${segments.map((chars) => chars.join("")).join("/")}`);
const host = fc.oneof(
  plainHost,
  fc.tuple(fc.array(label, { minLength: 1, maxLength: 4 }), port).map(([labels, p]) => `${labels.join(".")}${p}`),
  fc.tuple(ipv4, port).map(([ip, p]) => `${ip}${p}`),
  fc.tuple(fc.array(octetish, { minLength: 1, maxLength: 5 }), port).map(([labels, p]) => `${labels.join(".")}${p}`),
  fc
    .tuple(
      fc.constantFrom("xn--", "xn--a", "xn--80ak6aa92e", "a.xn--b", "Localhost", "EXAMPLE.com", "a..b", ".a", "a.", "-a", "a-", "[::1]", "a b", "a_b"),
      port,
    )
    .map(([h, p]) => `${h}${p}`),
  fc.string({ maxLength: 12 }),
);
/** Paths and queries near the edges: dot segments plain and escaped, `//`, every ASCII character and some others. */
const segment = fc.oneof(
  fc.constantFrom(".", "..", "%2e", "%2E", "%2e%2e", ".%2e", "", "a", "execute", "%zz", "%41", "'", "#", "\\", "?", "??", "a?b=/./c"),
  fc.array(pick("abcXYZ019-._~!$&'()*+,;=:@%?/#\\|[]{}^`\"<> \t\né€"), { maxLength: 8 }).map((chars) => chars.join("")),
);
const target = fc.oneof(
  fc
    .array(fc.array(pick("abcXYZ019-._~!$&()*+,;=:@%?"), { maxLength: 8 }), { maxLength: 5 })
    .map((segments) => `/${segments.map((chars) => chars.join("")).join("/")}`),
  fc.array(segment, { maxLength: 5 }).map((segments) => `/${segments.join("/")}`),
  fc.array(segment, { maxLength: 5 }).map((segments) => segments.join("/")),
  fc.string({ maxLength: 20 }),
);

describe("requestUrl", () => {
  it("answers exactly what the URL parser answers, for any Host and path", () => {
    fc.assert(
      fc.property(fc.option(host, { nil: undefined }), target, (h, t) => {
        expect(url(h, t)).toBe(parsed(h, t));
      }),
      { numRuns: 20_000 },
    );
  });

  it("answers the same for the plain ones it builds without the parser", () => {
    // Counts the inputs that take the fast path (no URL parsed): most of these must.
    let fast = 0;
    countingParses((count) =>
      fc.assert(
        fc.property(plainHost, plainTarget, (h, t) => {
          const before = count();
          const built = url(h, t);
          if (count() === before) fast++;
          expect(built).toBe(parsed(h, t));
        }),
        { numRuns: 20_000 },
      ),
    );
    expect(fast).toBeGreaterThan(5_000);
  });

  it("answers what the URL parser answers for the requests a service gets", () => {
    const cases: [string, string][] = [
      ["127.0.0.1:3000", "/public/v1/api/execute"],
      ["localhost:8787", "/public/v1/api/conversations/0190a2b3-c4d5-7e6f-8a9b-0c1d2e3f4a5b/messages?limit=50&before=12"],
      ["api.example.com", "/channels/webhook/abc_DEF-123/newMessage"],
      ["example.com:80", "/x"],
      ["example.com:0443", "/x"],
      ["1.2.3.4", "/x"],
      ["01.2.3.4", "/x"],
      ["1.2.3", "/x"],
      ["example.123", "/x"],
      ["example.0x1f", "/x"],
      ["xn--nxasmq6b.example", "/x"],
      ["EXAMPLE.com", "/x"],
      ["example.com", "//evil.example/x"],
      ["example.com", "/a/../b"],
      ["example.com", "/a/%2e%2E/b"],
      ["example.com", "/a?q='x'"],
      ["example.com", "/a#frag"],
      ["example.com", "/a\\b"],
      ["example.com", "/a b"],
      ["example.com", "*"],
    ];
    for (const [h, t] of cases) expect(url(h, t), `${h} ${t}`).toBe(parsed(h, t));
  });

  it("builds the usual request's URL without the parser", () => {
    countingParses((count) => {
      expect(url("127.0.0.1:3000", "/public/v1/api/execute")).toBe("http://127.0.0.1:3000/public/v1/api/execute");
      expect(url("api.example.com", "/public/v1/api/conversations/abc/messages?limit=50")).toBe(
        "http://api.example.com/public/v1/api/conversations/abc/messages?limit=50",
      );
      expect(count()).toBe(0);
      expect(url("api.example.com", "/a/../b")).toBe("http://api.example.com/b");
      expect(count()).toBeGreaterThan(0);
    });
  });

  it("answers the same for a Latin-1 host in the path after thousands of requests (Node 20's hot URL.canParse does not)", () => {
    const answers = new Set<string>();
    for (let i = 0; i < 20_000; i++) {
      url(undefined, `/warm/${i}`);
      answers.add(url(undefined, "//é"));
    }
    expect([...answers]).toEqual(["http://xn--9ca/"]);
  });

  it("keeps a base URL and an adapter's path as given", () => {
    expect(requestUrl({ headers: { host: "a.example" }, url: "/mounted/x" }, "https://b.example", { url: "/x" })).toBe("https://b.example/x");
    expect(requestUrl({ headers: { host: "a.example" }, url: "/mounted/x" }, undefined, { url: "/x?y=1" })).toBe("http://a.example/x?y=1");
  });
});
