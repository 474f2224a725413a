import { WidgetRequestError } from "./errors.js";

/** Where the widget talks to, and with which publishable key. */
export interface Connection {
  /** The service's base URL, without a trailing slash. */
  endpoint: string;
  /** A publishable key, `svc_pub_…`. */
  key: string;
}

/** A message restored from the history route. */
export interface HistoryMessage {
  role: "user" | "assistant";
  content: string;
  /** Set for a message of the human side of a live chat: `agent`, `supervisor`, `bot` or `system`. */
  sender?: string;
}

/** The failure a non-2xx answer stands for, from its `{ error: { code } }` envelope. */
export async function failureOf(response: Response): Promise<WidgetRequestError> {
  let code = "http_error";
  try {
    const body = (await response.json()) as { error?: { code?: unknown } } | null;
    if (typeof body?.error?.code === "string") code = body.error.code;
  } catch {
    // Not JSON (a proxy's error page): the status alone decides.
  }
  return new WidgetRequestError(response.status, code);
}

async function call(connection: Connection, path: string, init: RequestInit, signal: AbortSignal): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set("authorization", `Bearer ${connection.key}`);
  try {
    // Keys travel in the header only: no cookies, so the service never needs credentialed CORS.
    return await fetch(connection.endpoint + path, { ...init, headers, signal, credentials: "omit" });
  } catch (error) {
    if (signal.aborted) throw error;
    // fetch gives no reason (offline, DNS, CORS refusal are alike to a page).
    throw new WidgetRequestError(0, "network");
  }
}

/** `GET /public/widget/config`: the raw configuration (see `resolveConfig`). */
export async function loadConfig(connection: Connection, locale: string | null, signal: AbortSignal): Promise<unknown> {
  const query = locale ? `?locale=${encodeURIComponent(locale)}` : "";
  const response = await call(connection, `/public/widget/config${query}`, {}, signal);
  if (!response.ok) throw await failureOf(response);
  return response.json();
}

/** `POST /public/widget/chat`: the reply's SSE stream once the service has accepted the message. */
export async function startChat(
  connection: Connection,
  body: { payload: string; conversation_id?: string },
  signal: AbortSignal,
): Promise<ReadableStream<Uint8Array>> {
  const init = { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) };
  return streamOf(await call(connection, "/public/widget/chat", init, signal));
}

/**
 * `GET /public/widget/chat/{id}/stream`: the whole stream of the conversation's run in
 * flight, from its first event (`data-run`, every part so far, then the rest live), on a
 * channel with resumable streams; null when no run is in flight (204).
 */
export async function resumeChat(connection: Connection, conversationId: string, signal: AbortSignal): Promise<ReadableStream<Uint8Array> | null> {
  const response = await call(connection, `/public/widget/chat/${encodeURIComponent(conversationId)}/stream`, {}, signal);
  return response.status === 204 ? null : streamOf(response);
}

/** The body of a streamed answer; its error envelope thrown otherwise. */
async function streamOf(response: Response): Promise<ReadableStream<Uint8Array>> {
  if (!response.ok) throw await failureOf(response);
  if (!response.body) throw new WidgetRequestError(0, "network");
  return response.body;
}

/** `POST …/livechat/cancel`: the user leaves the queue or ends the live chat; the mode it is in now. */
export async function cancelLiveChat(connection: Connection, conversationId: string, signal: AbortSignal): Promise<LiveChatMode> {
  const response = await call(connection, `/public/v1/api/conversations/${encodeURIComponent(conversationId)}/livechat/cancel`, { method: "POST" }, signal);
  if (!response.ok) throw await failureOf(response);
  return liveChatMode(await response.json());
}

/** A conversation's live-chat mode and the channel's status message for it. */
export interface LiveChatMode {
  mode: string;
  statusMessage: string | null;
}

/** The mode of a history answer, a subscription's `mode` event or a cancel's answer. */
export function liveChatMode(body: unknown): LiveChatMode {
  const value = (typeof body === "object" && body !== null ? body : {}) as { mode?: unknown; livechat_status_message?: unknown };
  return {
    mode: typeof value.mode === "string" ? value.mode : "bot",
    statusMessage: typeof value.livechat_status_message === "string" ? value.livechat_status_message : null,
  };
}

/**
 * The user and assistant messages of a conversation, oldest first; `null` when the service
 * no longer knows it (the history route's 404, in its own `{ detail }` format).
 */
export async function loadHistory(
  connection: Connection,
  conversationId: string,
  signal: AbortSignal,
): Promise<{ messages: HistoryMessage[]; lastTurn: number; livechat: LiveChatMode } | null> {
  const path = `/public/v1/api/conversations/${encodeURIComponent(conversationId)}/messages?limit=50`;
  const response = await call(connection, path, {}, signal);
  if (response.status === 404) return null;
  if (!response.ok) throw await failureOf(response);
  const body = (await response.json()) as { messages?: unknown };
  const turns = Array.isArray(body.messages)
    ? body.messages.map((entry: { turn_index?: unknown } | null) => Number(entry?.turn_index)).filter(Number.isFinite)
    : [];
  return { messages: historyMessages(body.messages), lastTurn: turns.length > 0 ? Math.max(...turns) : -1, livechat: liveChatMode(body) };
}

/** `GET …/events`: the conversation's live-chat events after `afterTurn` (from now when null), as an SSE body. */
export async function openLiveChat(
  connection: Connection,
  conversationId: string,
  afterTurn: number | null,
  signal: AbortSignal,
): Promise<ReadableStream<Uint8Array>> {
  const query = afterTurn === null ? "" : `?after=${afterTurn}`;
  return streamOf(await call(connection, `/public/v1/api/conversations/${encodeURIComponent(conversationId)}/events${query}`, {}, signal));
}

/** The entries of a history answer the widget shows: user and assistant texts, the human side's marked with its sender. */
export function historyMessages(messages: unknown): HistoryMessage[] {
  if (!Array.isArray(messages)) return [];
  return messages.flatMap((entry: { role?: unknown; content?: unknown; origin?: unknown; sender?: unknown } | null) => {
    const role = entry?.role;
    const content = entry?.content;
    if (typeof content !== "string" || content === "") return [];
    const human = entry?.origin === "livechat" && typeof entry.sender === "string" && entry.sender !== "user" ? entry.sender : null;
    if (human) return [{ role: "assistant" as const, content, sender: human }];
    if (role !== "user" && role !== "assistant") return [];
    return [{ role, content }];
  });
}
