import { ChannelkitError } from "./errors.js";
import { newIdempotencyKey } from "./idempotency.js";
import { LiveChatSubscription } from "./livechat.js";
import { type RetryOptions, retryPolicy } from "./retry.js";
import { ChannelkitStream } from "./stream.js";
import { type Call, expectEventStream, json, segment, send, type Transport } from "./transport.js";
import type {
  AuditPage,
  CancelledRun,
  ChannelPatch,
  ChannelView,
  ExecuteBody,
  History,
  LiveChatCancelled,
  NewMessageBody,
  NewMessageResponse,
  RotatedKey,
  RotatedSigningSecret,
  RunDocument,
  StartConversationBody,
  StartConversationResponse,
  UpdatedChannel,
  WidgetChatBody,
  WidgetConfig,
} from "./types.js";

/** Options of {@link createClient}. */
export interface ClientOptions {
  /**
   * Where the service's routes are: its origin, plus the prefix it is mounted under if any
   * (`https://chat.example.com`, `http://127.0.0.1:3000/chat`).
   */
  baseUrl: string;
  /**
   * The channel's key (`svc_live_…`, `svc_test_…`, or `svc_pub_…` for the widget routes and
   * browsers), sent as `Authorization: Bearer`. Routes that take a key answer `401
   * missing_api_key` without it; the webhook and admin routes do not use it.
   */
  apiKey?: string;
  /**
   * The channel's signing secret (`svc_sig_…`): when given, every request with a body (execute,
   * stream, the widget's chat, the webhook calls) carries an `X-Service-Signature` computed over
   * the exact bytes sent. Never put it in a browser.
   */
  signingSecret?: string;
  /** An admin JWT for the admin routes (`admin(tenantId)`). Never put it in a browser. */
  adminToken?: string;
  /** The `fetch` to use (default: the global one), e.g. one with a proxy agent, or instrumented. */
  fetch?: typeof fetch;
  /**
   * When requests are sent again (see {@link RetryOptions}); `false` for never. Default: 2
   * retries of `GET`s and of the calls with an `Idempotency-Key` (execute, stream, `newMessage`).
   */
  retry?: RetryOptions | false;
  /**
   * Whether execute, stream and the webhook's `newMessage` carry an `Idempotency-Key` (default
   * true): a new random UUID per call, the same on each of its attempts, so that the service
   * runs the flow once however many times the call is sent, and the client retries those calls
   * like `GET`s. `false` sends none (a service older than the header ignores it; a browser needs
   * it allowed by the preflight, which channelkit's is) and those calls are not retried unless
   * `retry.unsafe`.
   */
  idempotencyKeys?: boolean;
  /** Headers sent with every request (e.g. `Origin` from a server, a tracing header). */
  headers?: Record<string, string>;
}

/** What every call takes. */
export interface CallOptions {
  /** Aborts the call, and a stream being read: the call rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Headers for this call only. */
  headers?: Record<string, string>;
}

/** What the calls that run a flow take: execute, stream, the webhook's `newMessage`. */
export interface RunCallOptions extends CallOptions {
  /**
   * The call's `Idempotency-Key` (1 to 255 visible ASCII characters), instead of a new random
   * one: send the same key again (from another process, after a restart) to get the first
   * answer rather than run the flow twice. Kept 24 hours by the service, per channel.
   */
  idempotencyKey?: string;
}

/** Options of {@link ChannelkitClient.history}. */
export interface HistoryOptions extends CallOptions {
  /** The most recent messages to return, 1 to 200 (default 50). */
  limit?: number;
  /** Keeps the most recent messages whose tokens fit; 0 (the default) for no budget. */
  token_budget?: number;
}

/** Options of {@link ChannelkitClient.livechat}'s `subscribe`. */
export interface SubscribeOptions extends CallOptions {
  /**
   * Replays the live-chat messages after this turn index (`-1`: all of them); without it the
   * subscription starts from now. Pass a previous subscription's `lastEventId` to go on.
   */
  after?: number;
}

/** Options of {@link ChannelkitClient.widget}'s `config`. */
export interface WidgetConfigOptions extends CallOptions {
  /** The language to answer in (`xx_XX`), else the best of `Accept-Language`, else the channel's first. */
  locale?: string;
}

/** Options of {@link ChannelkitClient.webhook}. */
export interface WebhookOptions {
  /** The webhook channel's secret, when it requires signatures (default: the client's `signingSecret`). */
  signingSecret?: string;
}

/** Options of {@link ChannelkitClient.admin}. */
export interface AdminOptions {
  /** The admin JWT (default: the client's `adminToken`). */
  token?: string;
}

/** Query of {@link AdminApi.audit}. */
export interface AuditOptions extends CallOptions {
  channel_id?: string;
  /** 1 to 200 (default 50). */
  limit?: number;
  /** The `next_cursor` of the previous page. */
  cursor?: string;
}

/** The webhook channel's two routes, for one `client_id`. No key: a signature when the channel requires one. */
export interface WebhookApi {
  /**
   * `POST /channels/webhook/{client_id}/startConversation`: opens a conversation (the flow's
   * `start` answers). Keep `conversation.conversation.id` for {@link newMessage}. Not retried.
   */
  startConversation(body: StartConversationBody, options?: CallOptions): Promise<StartConversationResponse>;
  /**
   * `POST /channels/webhook/{client_id}/newMessage`: the user's message, and the flow's replies.
   * With an `Idempotency-Key` (see `idempotencyKeys`), so retried: the flow runs once.
   */
  newMessage(body: NewMessageBody, options?: RunCallOptions): Promise<NewMessageResponse>;
}

/** The admin routes, for one tenant, with an admin JWT (`Authorization: Bearer`, `X-Tenant-ID`). */
export interface AdminApi {
  /** `POST /api/v1/channels/{id}/rotate-key`: a new key, shown once; the old one stops at once. Not retried. */
  rotateKey(channelId: string, options?: CallOptions): Promise<RotatedKey>;
  /** `POST /api/v1/channels/{id}/rotate-signing-secret`: a new secret, shown once; the old one stops at once. Not retried. */
  rotateSigningSecret(channelId: string, options?: CallOptions): Promise<RotatedSigningSecret>;
  /** `PATCH /api/v1/channels/{id}`: changes the channel's settings (see {@link ChannelPatch}). Not retried. */
  updateChannel(channelId: string, patch: ChannelPatch, options?: CallOptions): Promise<UpdatedChannel>;
  /** `GET /api/v1/channels/{id}`: the channel's view. */
  getChannel(channelId: string, options?: CallOptions): Promise<{ channel: ChannelView }>;
  /** `GET /api/v1/audit`: the tenant's audit trail, newest first. */
  audit(options?: AuditOptions): Promise<AuditPage>;
}

/** The widget channel's routes: publishable keys (`svc_pub_`) only. */
export interface WidgetApi {
  /** `GET /public/widget/config`: the widget's texts, theme and features. */
  config(options?: WidgetConfigOptions): Promise<WidgetConfig>;
  /** `POST /public/widget/chat`: always a stream, as {@link ChannelkitClient.stream}. Not retried. */
  chat(body: WidgetChatBody, options?: CallOptions): Promise<ChannelkitStream>;
  /** `GET /public/widget/chat/{chatId}/stream`: {@link ChannelkitClient.resume} for a chat id (or a conversation id). */
  resume(chatId: string, options?: CallOptions): Promise<ChannelkitStream | null>;
  /** `POST /public/widget/chat/{chatId}/cancel`: {@link ChannelkitClient.cancel} for a chat id. Not retried. */
  cancel(chatId: string, options?: CallOptions): Promise<CancelledRun | null>;
}

/** The live-chat routes of the user's side. */
export interface LiveChatApi {
  /**
   * `GET /public/v1/api/conversations/{id}/events`: the conversation's live chat as it happens
   * (see {@link LiveChatSubscription}). Resolves once the service answered.
   */
  subscribe(conversationId: string, options?: SubscribeOptions): Promise<LiveChatSubscription>;
  /**
   * `POST /public/v1/api/conversations/{id}/livechat/cancel`: leaves the queue or ends the live
   * chat; the next message goes to the bot. `409 livechat_conflict` when none waits or is active.
   * Not retried.
   */
  cancel(conversationId: string, options?: CallOptions): Promise<LiveChatCancelled>;
}

/**
 * A client of one channelkit service, made by {@link createClient}. Every method rejects with
 * a {@link ChannelkitError} when the service refuses (or an abort's reason when the call's
 * `signal` aborts).
 */
export interface ChannelkitClient {
  /**
   * `POST /public/v1/api/execute` with `stream: false`: runs the channel's flow and resolves to
   * the finished run. A flow that fails is a run with `status: "error"`, not a rejection. With
   * an `Idempotency-Key` (see `idempotencyKeys`), so retried after a 429, a 503 or a failure to
   * connect: the flow runs once, and a retry gets the first answer.
   */
  execute(body: ExecuteBody, options?: RunCallOptions): Promise<RunDocument>;
  /**
   * `POST /public/v1/api/execute` with `stream: true`: resolves once the stream began (its
   * `data-run` read), to a {@link ChannelkitStream} of UI message chunks. Errors before the
   * stream are rejections; a failure after it began is its `error` chunk. With an
   * `Idempotency-Key`, so retried until the stream began (a stream that breaks afterwards is
   * not sent again).
   */
  stream(body: ExecuteBody, options?: RunCallOptions): Promise<ChannelkitStream>;
  /**
   * `GET /public/v1/api/conversations/{id}/messages`: the conversation's history, oldest first.
   * An unknown conversation (or another channel's) is `conversation_not_found`, its text in
   * `detail`. Retried after a 429 or a 503.
   */
  history(conversationId: string, options?: HistoryOptions): Promise<History>;
  /**
   * `GET /public/v1/api/conversations/{id}/stream`: on a channel with resumable streams, the
   * stream of the conversation's run in flight, whole from its `data-run` then live; `null`
   * (204) when none is in flight.
   */
  resume(conversationId: string, options?: CallOptions): Promise<ChannelkitStream | null>;
  /**
   * `POST /public/v1/api/conversations/{id}/cancel`: stops the conversation's run in flight on
   * whichever instance runs it; `null` (204) when none is. Not retried.
   */
  cancel(conversationId: string, options?: CallOptions): Promise<CancelledRun | null>;
  /** The user's side of live chat: the subscription and the cancel. */
  readonly livechat: LiveChatApi;
  /** The widget channel's routes (a publishable key). */
  readonly widget: WidgetApi;
  /** The webhook channel's routes for `clientId`. */
  webhook(clientId: string, options?: WebhookOptions): WebhookApi;
  /** The admin routes for `tenantId`, with the client's `adminToken` (or `options.token`). */
  admin(tenantId: string, options?: AdminOptions): AdminApi;
}

/**
 * A client of the channelkit service at `baseUrl`. Runs wherever Web `fetch` and Web Crypto
 * do: Node 20+, browsers, Bun, Deno, Workers. Request bodies are in the wire's names
 * (`payload`, `conversation_id`, `metadata`).
 *
 * @example
 * import { createClient } from "@channelkit/client";
 *
 * const client = createClient({ baseUrl: "http://127.0.0.1:3000", apiKey: process.env.CHANNELKIT_KEY });
 * const run = await client.execute({ payload: "Hello" });
 * const reply = await client.stream({ payload: "And now?", conversation_id: run.conversation_id });
 * console.log(await reply.text());
 */
export function createClient(options: ClientOptions): ChannelkitClient {
  const transport: Transport = {
    baseUrl: options.baseUrl.replace(/\/+$/, ""),
    fetch: options.fetch ?? ((input, init) => fetch(input, init)),
    retry: retryPolicy(options.retry),
    headers: options.headers ?? {},
  };
  const bearer = (token: string | undefined) => (token === undefined ? undefined : `Bearer ${token}`);
  /** The key of a call that runs a flow: the caller's, else a new one (none with `idempotencyKeys: false`). */
  const keyOf = (given: string | undefined) => given ?? (options.idempotencyKeys === false ? undefined : newIdempotencyKey());
  const key = bearer(options.apiKey);

  const call = (method: Call["method"], path: string, extra: Partial<Call> & CallOptions, accept: Call["accept"] = "application/json") =>
    send(transport, { method, path, accept, authorization: key, ...extra });

  const getJson = async <T>(method: Call["method"], path: string, extra: Partial<Call> & CallOptions = {}): Promise<T> =>
    json<T>(await call(method, path, extra));

  /** A stream route: `null` on 204. */
  const openStream = async (method: Call["method"], path: string, extra: Partial<Call> & CallOptions): Promise<ChannelkitStream | null> => {
    const response = await call(method, path, extra, "text/event-stream");
    if (response.status === 204) return null;
    expectEventStream(response);
    return ChannelkitStream.open(response, extra.signal);
  };

  /** A route that always streams. */
  const alwaysStream = async (path: string, extra: Partial<Call> & CallOptions): Promise<ChannelkitStream> => {
    const stream = await openStream("POST", path, extra);
    if (stream === null) throw new ChannelkitError({ status: 204, code: "invalid_response", message: `${path} answered no stream.` });
    return stream;
  };

  /** A JSON answer, or `null` on 204. */
  const jsonOrNull = async <T>(path: string, extra: CallOptions): Promise<T | null> => {
    const response = await call("POST", path, extra);
    return response.status === 204 ? null : json<T>(response);
  };

  const conversation = (id: string, rest: string) => `/public/v1/api/conversations/${segment(id)}/${rest}`;
  const chatPath = (chatId: string, rest: string) => `/public/widget/chat/${segment(chatId)}/${rest}`;

  return {
    execute: (body, { idempotencyKey, ...callOptions } = {}) =>
      getJson<RunDocument>("POST", "/public/v1/api/execute", {
        ...callOptions,
        body: { ...body, stream: false },
        signingSecret: options.signingSecret,
        idempotencyKey: keyOf(idempotencyKey),
      }),

    stream: (body, { idempotencyKey, ...callOptions } = {}) =>
      alwaysStream("/public/v1/api/execute", {
        ...callOptions,
        body: { ...body, stream: true },
        signingSecret: options.signingSecret,
        idempotencyKey: keyOf(idempotencyKey),
      }),

    history: (conversationId, { limit, token_budget, ...callOptions } = {}) =>
      getJson<History>("GET", conversation(conversationId, "messages"), { ...callOptions, query: { limit, token_budget } }),

    resume: (conversationId, callOptions = {}) => openStream("GET", conversation(conversationId, "stream"), callOptions),

    cancel: (conversationId, callOptions = {}) => jsonOrNull<CancelledRun>(conversation(conversationId, "cancel"), callOptions),

    livechat: {
      async subscribe(conversationId, { after, ...callOptions } = {}) {
        const response = await call("GET", conversation(conversationId, "events"), { ...callOptions, query: { after } }, "text/event-stream");
        expectEventStream(response);
        return new LiveChatSubscription(response, callOptions.signal, after);
      },
      cancel: (conversationId, callOptions = {}) => getJson<LiveChatCancelled>("POST", conversation(conversationId, "livechat/cancel"), callOptions),
    },

    widget: {
      config: ({ locale, ...callOptions } = {}) => getJson<WidgetConfig>("GET", "/public/widget/config", { ...callOptions, query: { locale } }),
      chat: (body, callOptions = {}) => alwaysStream("/public/widget/chat", { ...callOptions, body, signingSecret: options.signingSecret }),
      resume: (chatId, callOptions = {}) => openStream("GET", chatPath(chatId, "stream"), callOptions),
      cancel: (chatId, callOptions = {}) => jsonOrNull<CancelledRun>(chatPath(chatId, "cancel"), callOptions),
    },

    webhook(clientId, webhookOptions = {}) {
      const signingSecret = webhookOptions.signingSecret ?? options.signingSecret;
      const post = <T>(route: string, body: unknown, callOptions: CallOptions = {}, idempotencyKey?: string) =>
        getJson<T>("POST", `/channels/webhook/${segment(clientId)}/${route}`, {
          ...callOptions,
          body,
          signingSecret,
          authorization: undefined,
          idempotencyKey,
        });
      return {
        startConversation: (body, callOptions) => post<StartConversationResponse>("startConversation", body, callOptions),
        newMessage: (body, { idempotencyKey, ...callOptions } = {}) => post<NewMessageResponse>("newMessage", body, callOptions, keyOf(idempotencyKey)),
      };
    },

    admin(tenantId, adminOptions = {}) {
      const authorization = bearer(adminOptions.token ?? options.adminToken);
      const request = <T>(method: Call["method"], path: string, extra: Partial<Call> & CallOptions = {}) =>
        getJson<T>(method, path, { ...extra, authorization, tenantId });
      const channel = (id: string, rest = "") => `/api/v1/channels/${segment(id)}${rest}`;
      return {
        rotateKey: (channelId, callOptions) => request<RotatedKey>("POST", channel(channelId, "/rotate-key"), callOptions),
        rotateSigningSecret: (channelId, callOptions) => request<RotatedSigningSecret>("POST", channel(channelId, "/rotate-signing-secret"), callOptions),
        updateChannel: (channelId, patch, callOptions) => request<UpdatedChannel>("PATCH", channel(channelId), { ...callOptions, body: patch }),
        getChannel: (channelId, callOptions) => request<{ channel: ChannelView }>("GET", channel(channelId), callOptions),
        audit: ({ channel_id, limit, cursor, ...callOptions } = {}) =>
          request<AuditPage>("GET", "/api/v1/audit", { ...callOptions, query: { channel_id, limit, cursor } }),
      };
    },
  };
}
