import { describe, expect, it } from "vitest";
import { failureOf } from "./api.js";
import { FALLBACK_STRINGS } from "./config.js";
import { asRequestError, errorView, WidgetRequestError } from "./errors.js";

const errors = { ...FALLBACK_STRINGS.errors, generic: "Generic." };

function envelope(status: number, code: string): Response {
  return Response.json({ error: { code, message: `the ${code} message` } }, { status });
}

describe("errorView: each failure's message and whether Retry is offered", () => {
  it.each([
    [401, "missing_api_key", "invalid_api_key", false],
    [401, "invalid_api_key", "invalid_api_key", false],
    [403, "public_key_required", "invalid_api_key", false],
    [403, "environment_mismatch", "invalid_api_key", false],
    [403, "wrong_channel_type", "invalid_api_key", false],
    [403, "origin_not_allowed", "origin_not_allowed", false],
    [409, "channel_inactive", "channel_inactive", false],
    [410, "channel_archived", "channel_archived", false],
    [413, "payload_too_large", "generic", false],
    [422, "validation_error", "generic", false],
    [429, "rate_limited", "generic", true],
    [500, "runtime_error", "generic", true],
    [503, "http_error", "generic", true],
    [0, "network", "network", true],
    [200, "stream_error", "generic", true],
  ] as const)("%i %s → errors.%s, retry %s", (status, code, kind, retry) => {
    const view = errorView(new WidgetRequestError(status, code), errors);
    expect(view).toEqual({ kind, message: errors[kind], retry });
  });

  it("treats anything thrown that is not a request error as a lost connection", () => {
    expect(asRequestError(new TypeError("Failed to fetch"))).toMatchObject({ status: 0, code: "network" });
    const known = new WidgetRequestError(403, "origin_not_allowed");
    expect(asRequestError(known)).toBe(known);
  });
});

describe("failureOf: the failure an HTTP answer stands for", () => {
  it("reads the envelope's code", async () => {
    expect(await failureOf(envelope(403, "origin_not_allowed"))).toMatchObject({ status: 403, code: "origin_not_allowed" });
    expect(await failureOf(envelope(409, "channel_inactive"))).toMatchObject({ status: 409, code: "channel_inactive" });
  });

  it("falls back to the status alone for a body that is not the envelope (a proxy's page, the history route's { detail })", async () => {
    const proxy = await failureOf(new Response("<h1>Bad gateway</h1>", { status: 502, headers: { "content-type": "text/html" } }));
    expect(proxy).toMatchObject({ status: 502, code: "http_error" });
    expect(errorView(proxy, errors)).toMatchObject({ kind: "generic", retry: true });
    expect(await failureOf(Response.json({ detail: "No conversation" }, { status: 404 }))).toMatchObject({ status: 404, code: "http_error" });
  });
});
