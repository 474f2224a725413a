import { APICallError, RetryError } from "ai";

/** The failure behind the AI SDK's retries (a `RetryError` wraps the last attempt's). */
export function underlying(error: unknown): unknown {
  return RetryError.isInstance(error) ? error.lastError : error;
}

/**
 * A model's failure as a run's error: readable, and never the provider's own message, which
 * may quote the request (the prompt) or part of a key. The status says what went wrong.
 */
export function modelFailure(failure: unknown): string {
  const error = underlying(failure);
  if (APICallError.isInstance(error)) {
    const status = error.statusCode;
    if (status === 401 || status === 403) return `The model provider refused the request (HTTP ${status}): check its API key and access.`;
    if (status === 429) return "The model provider is rate limiting these requests (HTTP 429): try again later.";
    if (status !== undefined && status >= 500) return `The model provider failed (HTTP ${status}): try again later.`;
    if (status !== undefined) return `The model provider refused the request (HTTP ${status}).`;
    return "The model provider could not be reached.";
  }
  const name = error instanceof Error && error.name !== "Error" ? ` (${error.name})` : "";
  return `The model call failed${name}.`;
}

/** A tool's error as the model and the history see it: its message. */
export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
