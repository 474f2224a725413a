/**
 * Parts of route documentation that several routes share: the error codes of a check, the
 * parameters and headers of the contract. A plugin's route may use them too (a route
 * authenticated by a channel key answers the {@link CHANNEL_KEY} codes).
 */
import { z } from "zod";
import type { ErrorCode } from "../http/errors.js";
import type { HeaderName, ParameterSpec, SuccessSpec } from "./spec.js";

/** Checks 1 to 5 of execute: a channel key of an active API channel of the right environment, and an allowed origin. */
export const CHANNEL_KEY: ErrorCode[] = [
  "missing_api_key",
  "invalid_api_key",
  "wrong_channel_type",
  "channel_archived",
  "channel_inactive",
  "environment_mismatch",
  "origin_not_allowed",
  "rate_limited",
  "runtime_error",
];
/** The widget's routes: {@link CHANNEL_KEY}, and a server key refused. */
export const PUBLISHABLE_KEY: ErrorCode[] = [...CHANNEL_KEY, "public_key_required"];
/** Reading a JSON body. */
export const JSON_BODY: ErrorCode[] = ["unsupported_media_type", "payload_too_large", "bad_request", "validation_error"];
/** A channel's signature, when the channel requires one. */
export const SIGNATURE: ErrorCode[] = ["signing_secret_unavailable", "signature_required", "invalid_signature", "signature_expired"];
/** A stream that stays open: past the caps on open streams (the service's `streamLimits`). */
export const STREAMED: ErrorCode[] = ["too_many_streams"];
/** An admin JWT for the tenant of `X-Tenant-ID`. */
export const ADMIN: ErrorCode[] = ["missing_tenant", "unauthorized", "forbidden", "jwks_unavailable", "rate_limited", "runtime_error"];

export const conversationParam = (name: string, description: string): ParameterSpec => ({ name, in: "path", required: true, description });
export const SESSION_ID = conversationParam("session_id", "The `conversation_id` a run answered (UUIDs compare case-insensitively).");
export const CONVERSATION_ID = conversationParam("conversation_id", "The conversation's id.");
export const CHAT_ID = conversationParam(
  "chat_id",
  "The AI SDK chat id the widget's chat was sent with (or a conversation id of the channel); a chat with no conversation yet answers 204.",
);
export const CHANNEL_ID = conversationParam("channel_id", "The channel's id.");
export const ORIGIN: ParameterSpec = {
  name: "Origin",
  in: "header",
  description:
    "Sent by browsers. With a publishable key it must be one of the channel's `allowed_origins` (403 `origin_not_allowed`); server keys are not checked.",
};
export const SIGNATURE_HEADER: ParameterSpec = {
  name: "X-Service-Signature",
  in: "header",
  description:
    "`t=<unix seconds>,v1=<lowercase hex HMAC-SHA256 of \"<t>.<raw body>\">` keyed with the channel's signing secret, within 300 s of now; several `v1=` entries may be sent, any match passes. Required when the channel's `config.require_signature` is true, ignored otherwise.",
  // What a client sends; the server also reads the entries in any order, with spaces, and ignores other schemes.
  schema: z.string().regex(/^t=\d{1,15}(,v1=[0-9a-f]{64})+$/),
};

/** The routes that take an `Idempotency-Key` (execute, the webhook's `newMessage`): its format, then the key's own refusals. */
export const IDEMPOTENCY: ErrorCode[] = ["invalid_idempotency_key", "idempotency_key_in_use", "idempotency_key_reused"];
export const IDEMPOTENCY_KEY_HEADER: ParameterSpec = {
  name: "Idempotency-Key",
  in: "header",
  description:
    "Makes the request safe to retry (our extension, as Stripe's): a request sent again with the same key and the same JSON body within 24 hours answers the first request's answer (`Idempotent-Replayed: true`; a stream replays its events) without running the flow again. The same key with another body is 422 `idempotency_key_reused`; while the first request still runs, on any instance, 409 `idempotency_key_in_use` with `Retry-After`. Scoped to the channel. A request refused before its run (any other error) keeps no key, nor does a run stopped because its client left. 1 to 255 visible ASCII characters, e.g. a UUID (400 `invalid_idempotency_key` otherwise).",
  schema: z.string().regex(/^[\x21-\x7e]{1,255}$/),
};

export const STREAM_HEADERS: HeaderName[] = ["Cache-Control-Stream", "X-Accel-Buffering", "X-Vercel-AI-UI-Message-Stream"];
/**
 * `Connection: keep-alive`, sent with every stream but hop-by-hop: HTTP/2 forbids it and
 * Cloudflare Workers drop it, so a client may not see it.
 */
export const HOP_BY_HOP: HeaderName[] = ["Connection"];

/** The answers of stopping a run (the API's and the widget's cancel). */
export const CANCEL_RESPONSES: Record<number, SuccessSpec> = {
  200: { description: "The run is stored: `cancelled`, or how it ended if it ended first.", json: "RunCancelled" },
  202: { description: "The run was told to stop but is not stored within 10 s.", json: "RunCancelling" },
  204: { description: "No run of this conversation is in flight." },
};

/** The answers of following a run (the API's and the widget's stream). */
export const RESUME_RESPONSES: Record<number, SuccessSpec> = {
  200: {
    description:
      "The stream of the conversation's run in flight, every event from its `data-run`, then live to its `finish` or `error` (the run whose stream started last, when several are in flight).",
    sse: "UIMessageStreamEvent",
    headers: STREAM_HEADERS,
    optionalHeaders: HOP_BY_HOP,
  },
  204: { description: "No run of a resumable channel is in flight for this conversation." },
};
