/** The measured scenarios: the same requests sent to the baseline and to channelkit. */
import { signRequestBody } from "@channelkit/core";
import type { RequestSpec } from "./load.js";
import type { Seed } from "./seed.js";
import type { ServerKind } from "./shared.js";

export interface Scenario {
  id: string;
  title: string;
  /** `request`: autocannon; `stream`: the SSE client (time to first event and to the end). */
  mode: "request" | "stream";
  /** Fixed connection count, else the run's default. */
  connections?: number;
  /** The servers that answer it (default: all; the lean baseline serves execute and history only). */
  on?: ServerKind[];
  /** Deal its requests across the connections rather than cycle through them on each (see LoadOptions.spread). */
  spread?: true;
  expectStatus: number;
  /** Statuses also counted as answered during the load (the pre-measurement check wants `expectStatus`). */
  alsoAccept?: number[];
  /** Built just before each measurement (signatures carry the current time). */
  requests(seed: Seed): Promise<RequestSpec[]>;
  /**
   * Set when channelkit is measured against itself rather than against the baseline server:
   * both sides are the channelkit server, the reference side (reported where the baseline
   * is) sending these requests instead of `requests`.
   */
  reference?: { title: string; requests(seed: Seed): Promise<RequestSpec[]> };
}

const EXECUTE = "/public/v1/api/execute";
const PAYLOAD = "Hello, channelkit! How are you today?";
const STREAM_PAYLOAD = "Hello, channelkit! Stream these few words back to me.";
/** How many distinct signed bodies autocannon cycles through. */
const SIGNED_BODIES = 64;
/** The lean baseline answers execute, without signatures, and history only. */
const WITHOUT_LEAN: ServerKind[] = ["baseline", "channelkit", "serve", "base"];

const post = (key: string, body: string, extra: Record<string, string> = {}): RequestSpec => ({
  method: "POST",
  path: EXECUTE,
  headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...extra },
  body,
});

const history = (key: string, conversation: string, query: string): RequestSpec => ({
  method: "GET",
  path: `/public/v1/api/conversations/${conversation}/messages?${query}`,
  headers: { authorization: `Bearer ${key}` },
});

export const HISTORY_BUDGET = 300;

export const SCENARIOS: Scenario[] = [
  {
    id: "execute-json",
    title: "execute, JSON (echo flow, new conversation)",
    mode: "request",
    expectStatus: 200,
    requests: async (seed) => [post(seed.echoKey, JSON.stringify({ payload: PAYLOAD }))],
  },
  {
    id: "execute-stream",
    title: "execute, SSE stream (echo flow)",
    mode: "stream",
    expectStatus: 200,
    requests: async (seed) => [post(seed.echoKey, JSON.stringify({ payload: STREAM_PAYLOAD, stream: true }))],
  },
  {
    id: "execute-stream-1",
    title: "execute, SSE stream, one connection (unloaded latency)",
    mode: "stream",
    connections: 1,
    expectStatus: 200,
    requests: async (seed) => [post(seed.echoKey, JSON.stringify({ payload: STREAM_PAYLOAD, stream: true }))],
  },
  {
    id: "execute-hmac",
    title: "execute, JSON, HMAC-signed body",
    mode: "request",
    on: WITHOUT_LEAN,
    expectStatus: 200,
    async requests(seed) {
      const specs: RequestSpec[] = [];
      for (let i = 0; i < SIGNED_BODIES; i++) {
        const body = JSON.stringify({ payload: `${PAYLOAD} #${i}`, metadata: { request: i } });
        specs.push(post(seed.signedKey, body, { "x-service-signature": await signRequestBody(seed.signingSecret, body) }));
      }
      return specs;
    },
  },
  {
    id: "invalid-key",
    title: "execute with an unknown key (401; channelkit: 429 past 100 a minute)",
    mode: "request",
    expectStatus: 401,
    // channelkit's default failed_auth limit (100 failed authentications a minute per client
    // address, docs/security.md) answers 429 rate_limited past it: the refusal, still counted.
    alsoAccept: [429],
    requests: async (seed) => [post(seed.unknownKey, JSON.stringify({ payload: PAYLOAD }))],
  },
  {
    id: "history-100",
    title: "history, limit=50, conversation of 100 messages",
    mode: "request",
    expectStatus: 200,
    requests: async (seed) => [history(seed.echoKey, seed.conversation100, "limit=50")],
  },
  {
    id: "history-10k",
    title: "history, limit=50, conversation of 10,000 messages",
    mode: "request",
    expectStatus: 200,
    requests: async (seed) => [history(seed.echoKey, seed.conversation10k, "limit=50")],
  },
  {
    id: "history-100-budget",
    title: `history, limit=50&token_budget=${HISTORY_BUDGET}, 100 messages`,
    mode: "request",
    expectStatus: 200,
    requests: async (seed) => [history(seed.echoKey, seed.conversation100, `limit=50&token_budget=${HISTORY_BUDGET}`)],
  },
  {
    id: "history-10k-budget",
    title: `history, limit=50&token_budget=${HISTORY_BUDGET}, 10,000 messages`,
    mode: "request",
    expectStatus: 200,
    requests: async (seed) => [history(seed.echoKey, seed.conversation10k, `limit=50&token_budget=${HISTORY_BUDGET}`)],
  },
  {
    id: "webhook-new-message",
    title: "webhook newMessage (echo flow, 64 conversations in turn)",
    mode: "request",
    on: WITHOUT_LEAN,
    expectStatus: 200,
    spread: true,
    requests: async (seed) =>
      seed.webhookConversations.map((conversationId, i) => ({
        method: "POST",
        path: `/channels/webhook/${seed.webhookClientId}/newMessage`,
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ conversationId, userInput: `${PAYLOAD} #${i}` }),
      })),
  },
  {
    id: "widget-chat",
    title: "widget chat, SSE stream (echo flow, 64 conversations in turn)",
    mode: "stream",
    on: WITHOUT_LEAN,
    expectStatus: 200,
    spread: true,
    requests: async (seed) =>
      seed.widgetConversations.map((conversation_id) => ({
        method: "POST",
        path: "/public/widget/chat",
        headers: { authorization: `Bearer ${seed.widgetKey}`, origin: seed.widgetOrigin, "content-type": "application/json" },
        body: JSON.stringify({ payload: STREAM_PAYLOAD, conversation_id }),
      })),
  },
  {
    id: "resumable-stream",
    title: "execute, SSE stream (echo flow), resumable channel against a plain one",
    mode: "stream",
    expectStatus: 200,
    requests: async (seed) => [post(seed.resumableEchoKey, JSON.stringify({ payload: STREAM_PAYLOAD, stream: true }))],
    reference: {
      title: "the same stream on a channel without resumable streams",
      requests: async (seed) => [post(seed.echoKey, JSON.stringify({ payload: STREAM_PAYLOAD, stream: true }))],
    },
  },
  {
    id: "resumable-stream-1",
    title: "execute, SSE stream, one connection, resumable channel against a plain one",
    mode: "stream",
    connections: 1,
    expectStatus: 200,
    requests: async (seed) => [post(seed.resumableEchoKey, JSON.stringify({ payload: STREAM_PAYLOAD, stream: true }))],
    reference: {
      title: "the same stream on a channel without resumable streams",
      requests: async (seed) => [post(seed.echoKey, JSON.stringify({ payload: STREAM_PAYLOAD, stream: true }))],
    },
  },
];

/** The request of the memory measurement: a stream of the `slow` flow (5 s long). */
export function slowStream(seed: Seed): RequestSpec {
  return post(seed.slowKey, JSON.stringify({ payload: "hold this stream open", stream: true }));
}
