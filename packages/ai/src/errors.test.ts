import { APICallError, RetryError } from "ai";
import { describe, expect, it } from "vitest";
import { modelFailure } from "./errors.js";

const apiError = (statusCode: number | undefined) =>
  new APICallError({
    message: "Incorrect API key provided: sk-live-0123456789",
    url: "https://api.example/v1",
    requestBodyValues: { prompt: "a secret question" },
    ...(statusCode === undefined ? {} : { statusCode }),
    isRetryable: statusCode === undefined || statusCode >= 429,
  });

describe("modelFailure", () => {
  it("says what the status means, never the provider's text", () => {
    expect(modelFailure(apiError(401))).toBe("The model provider refused the request (HTTP 401): check its API key and access.");
    expect(modelFailure(apiError(429))).toBe("The model provider is rate limiting these requests (HTTP 429): try again later.");
    expect(modelFailure(apiError(503))).toBe("The model provider failed (HTTP 503): try again later.");
    expect(modelFailure(apiError(400))).toBe("The model provider refused the request (HTTP 400).");
    expect(modelFailure(apiError(undefined))).toBe("The model provider could not be reached.");
    expect(modelFailure(new TypeError("fetch failed"))).toBe("The model call failed (TypeError).");
    expect(modelFailure("something")).toBe("The model call failed.");
  });

  it("reads through the AI SDK's retries: the last attempt's failure is the one told", () => {
    const retried = new RetryError({ message: "Failed after 3 attempts", reason: "maxRetriesExceeded", errors: [apiError(503), apiError(503), apiError(502)] });
    expect(modelFailure(retried)).toBe("The model provider failed (HTTP 502): try again later.");
    expect(modelFailure(retried)).not.toContain("sk-live");
  });
});
