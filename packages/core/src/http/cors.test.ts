import { describe, expect, it } from "vitest";
import { withCors } from "./cors.js";
import type { Reply } from "./reply.js";

const request = (origin: string | null) => new Request("http://test/x", origin === null ? {} : { headers: { origin } });
const reply = (headers: Record<string, string>): Reply => ({ status: 200, headers: { ...headers }, body: null });

describe("withCors", () => {
  it("exposes to a page's script the headers that say when to retry and that an answer is a replay, and only those present", () => {
    expect(withCors(request("https://app.example"), reply({ ratelimit: "limit=1" })).headers["access-control-expose-headers"]).toBe(
      "Retry-After, RateLimit, RateLimit-Policy",
    );
    expect(withCors(request("https://app.example"), reply({ "idempotent-replayed": "true" })).headers["access-control-expose-headers"]).toBe(
      "Idempotent-Replayed",
    );
    expect(
      withCors(request("https://app.example"), reply({ ratelimit: "limit=1", "idempotent-replayed": "true" })).headers["access-control-expose-headers"],
    ).toBe("Retry-After, RateLimit, RateLimit-Policy, Idempotent-Replayed");
    // A refusal that counted no rate limit (too_many_streams on a server key) still says when to retry.
    expect(withCors(request("https://app.example"), reply({ "retry-after": "5" })).headers["access-control-expose-headers"]).toBe("Retry-After");
    expect(withCors(request("https://app.example"), reply({})).headers["access-control-expose-headers"]).toBeUndefined();
    // No Origin, no CORS headers at all.
    expect(withCors(request(null), reply({ "idempotent-replayed": "true" })).headers["access-control-allow-origin"]).toBeUndefined();
  });
});
