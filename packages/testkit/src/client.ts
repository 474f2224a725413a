import { expect } from "vitest";
import type { RunRecord, Storage } from "@channelkit/core";
import type { Harness } from "./harness.js";
import { fetch } from "./conformance.js";

/** Path of the execute route. */
export const EXECUTE_PATH = "/public/v1/api/execute";

/** Path of the history route of a conversation. */
export function historyPath(sessionId: string): string {
  return `/public/v1/api/conversations/${encodeURIComponent(sessionId)}/messages`;
}

/** Lowercase or uppercase RFC 9562 UUID of any version. */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** ISO 8601 timestamp with a time zone designator. */
export const ISO_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/**
 * A request body: a plain object is sent as JSON; a string, bytes, form data or a stream are
 * sent exactly as given (for malformed bodies and signed raw bytes).
 */
export type Body = Record<string, unknown> | string | Uint8Array | FormData | ReadableStream<Uint8Array>;

/** Headers a test may vary. */
export interface RequestOptions {
  /** Raw `Authorization` value instead of `Bearer <key>`; `null` sends none. */
  authorization?: string | null;
  /** `Content-Type` (default `application/json`, none for form data); `null` sends none. */
  contentType?: string | null;
  origin?: string;
  /** `X-Service-Signature`. */
  signature?: string;
  signal?: AbortSignal;
}

/** The execute response document (`stream` false). */
interface RunDocument {
  run_id: string;
  conversation_id: string;
  status: "success" | "error" | "pending" | "cancelled";
  output: {
    result: unknown;
    error: string | null;
    messages: { role: string; content: string }[];
    metadata: {
      channel_id: string;
      flow_id: string;
      flow_name: string;
      flow_version: string | null;
      environment: string;
      execution_order: string[];
      started_at: string;
      completed_at: string;
      livechat_mode: string | null;
    };
  };
  usage: { total_nodes: number; duration_ms: number };
  error: { code: string; message: string } | null;
}

/** One entry of a history response. */
export interface HistoryMessage {
  origin: string;
  role: string;
  content: string;
  timestamp: string;
  turn_index: number;
  token_count: number;
  run_id: string | null;
  step_id: string | null;
  node_type: string | null;
  tool_calls: unknown[] | null;
  tool_call_id: string | null;
  livechat_message_id: string | null;
  sender: string | null;
}

/** The history response. */
interface HistoryDocument {
  session_id: string;
  messages: HistoryMessage[];
  total_messages: number;
  total_tokens: number;
  mode: string | null;
  livechat_status_message: string | null;
  livechat_conversation_id: string | null;
}

function headersFor(key: string | null, options: RequestOptions, defaultType: string | null): Headers {
  const headers = new Headers();
  const authorization = options.authorization === undefined ? (key === null ? null : `Bearer ${key}`) : options.authorization;
  if (authorization !== null) headers.set("authorization", authorization);
  const contentType = options.contentType === undefined ? defaultType : options.contentType;
  if (contentType !== null) headers.set("content-type", contentType);
  if (options.origin !== undefined) headers.set("origin", options.origin);
  if (options.signature !== undefined) headers.set("x-service-signature", options.signature);
  return headers;
}

/** `POST /public/v1/api/execute` with `key` (or none when `null`). */
export function execute(h: Harness, key: string | null, body: Body, options: RequestOptions = {}): Promise<Response> {
  const raw = typeof body === "string" || body instanceof Uint8Array || body instanceof FormData || body instanceof ReadableStream;
  const init: RequestInit & { duplex?: "half" } = {
    method: "POST",
    headers: headersFor(key, options, body instanceof FormData ? null : "application/json"),
    body: raw ? (body as BodyInit) : JSON.stringify(body),
  };
  // A stream body must be sent half-duplex (chunked), per the fetch standard.
  if (body instanceof ReadableStream) init.duplex = "half";
  if (options.signal) init.signal = options.signal;
  return fetch(h.url(EXECUTE_PATH), init);
}

/** Executes with `stream: false` and returns the 200 JSON document. */
export async function runJson(h: Harness, key: string, body: Record<string, unknown>, options: RequestOptions = {}): Promise<RunDocument> {
  const response = await execute(h, key, { stream: false, ...body }, options);
  const text = await response.text();
  expect(response.status, text).toBe(200);
  expect(response.headers.get("content-type")).toMatch(/^application\/json\b/);
  return JSON.parse(text) as RunDocument;
}

/** `GET` the history of a conversation, with query parameters given as strings. */
export function history(
  h: Harness,
  key: string | null,
  sessionId: string,
  query: Record<string, string> = {},
  options: RequestOptions = {},
): Promise<Response> {
  const search = new URLSearchParams(query).toString();
  const init: RequestInit = { method: "GET", headers: headersFor(key, options, null) };
  return fetch(h.url(historyPath(sessionId)) + (search ? `?${search}` : ""), init);
}

/** Reads a 200 history document. */
export async function readHistory(h: Harness, key: string, sessionId: string, query: Record<string, string> = {}): Promise<HistoryDocument> {
  const response = await history(h, key, sessionId, query);
  const text = await response.text();
  expect(response.status, text).toBe(200);
  return JSON.parse(text) as HistoryDocument;
}

/**
 * Asserts the contract's error envelope: exactly `{ error: { code, message } }` with the
 * status of the code (a `validation_error` may add `details` describing the failing fields).
 */
export async function expectError(response: Response, status: number, code: string): Promise<void> {
  const text = await response.text();
  expect({ status: response.status, body: text }).toMatchObject({ status });
  expect(response.headers.get("content-type")).toMatch(/^application\/json\b/);
  const body = JSON.parse(text) as { error?: Record<string, unknown> };
  expect(Object.keys(body)).toEqual(["error"]);
  const { code: actual, message, ...rest } = body.error ?? {};
  expect(actual).toBe(code);
  expect(typeof message).toBe("string");
  expect((message as string).length).toBeGreaterThan(0);
  expect(Object.keys(rest)).toEqual(code === "validation_error" && "details" in rest ? ["details"] : []);
}

/** Asserts an execute answered 200 with a JSON run whose status is `success`. */
export async function expectAccepted(response: Response): Promise<void> {
  const text = await response.text();
  expect(response.status, text).toBe(200);
  expect((JSON.parse(text) as { status: string }).status).toBe("success");
}

/** Asserts the history route's 404: exactly `{ detail: "No conversation found for session id <id>" }`. */
export async function expectNoConversation(response: Response, sessionId: string): Promise<void> {
  expect(response.status).toBe(404);
  expect(response.headers.get("content-type")).toMatch(/^application\/json\b/);
  expect(await response.json()).toEqual({ detail: `No conversation found for session id ${sessionId}` });
}

/** A well-formed key of `prefix` that no channel has. */
export function unknownKey(prefix: "svc_live_" | "svc_test_" | "svc_pub_" = "svc_live_"): string {
  return prefix + "Zz9".repeat(15);
}

/**
 * Polls `probe` until it returns a value other than `null`/`undefined`, for at most
 * `timeoutMs`: for effects that complete after the response (a cancelled run being stored).
 */
export async function waitFor<T>(probe: () => Promise<T | null | undefined>, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== null && value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`waitFor: nothing after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A run once it is stored with its outcome: its row exists while it runs, with status `running`. */
export function storedRun(storage: Pick<Storage, "findRun">, runId: string, timeoutMs?: number): Promise<RunRecord> {
  return waitFor(async () => {
    const run = await storage.findRun(runId);
    return run && run.status !== "running" ? run : null;
  }, timeoutMs);
}
