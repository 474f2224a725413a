import type { WidgetErrorStrings } from "./types.js";

/**
 * A failed exchange with the service: the HTTP status and the error envelope's `code`;
 * status 0 with code `network` when no answer came (offline, connection cut mid-stream,
 * CORS refusal), status 200 with code `stream_error` for an `error` event in the stream.
 */
export class WidgetRequestError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
  ) {
    super(`channelkit widget: ${status === 0 ? "no answer" : `HTTP ${status}`} (${code})`);
    this.name = "WidgetRequestError";
  }
}

/** What to show for a failure: a text of the configuration, and whether resending can help. */
export interface ErrorView {
  /** Which text of `strings.errors`. */
  kind: keyof WidgetErrorStrings;
  message: string;
  /** Offer Retry: the failure may pass (network, 5xx, a failed run, rate limit). */
  retry: boolean;
}

// Every key problem reads as a chat that is "not set up correctly": the visitor can do
// nothing about it, the site owner finds the code on the host element.
const KIND_OF_CODE: Readonly<Record<string, keyof WidgetErrorStrings>> = {
  network: "network",
  origin_not_allowed: "origin_not_allowed",
  channel_inactive: "channel_inactive",
  channel_archived: "channel_archived",
  missing_api_key: "invalid_api_key",
  invalid_api_key: "invalid_api_key",
  public_key_required: "invalid_api_key",
  environment_mismatch: "invalid_api_key",
  wrong_channel_type: "invalid_api_key",
};

/** Maps a failure to its message in the configuration's language. */
export function errorView(failure: WidgetRequestError, errors: WidgetErrorStrings): ErrorView {
  const kind = KIND_OF_CODE[failure.code] ?? "generic";
  const retry = failure.status === 0 || failure.status === 429 || failure.status >= 500 || failure.code === "stream_error";
  return { kind, message: errors[kind], retry };
}

/** Any thrown value as a {@link WidgetRequestError}; what is not one is treated as a lost connection. */
export function asRequestError(error: unknown): WidgetRequestError {
  return error instanceof WidgetRequestError ? error : new WidgetRequestError(0, "network");
}
