import { type AdminAuthOptions, adminAuthenticator } from "../../auth/admin-token.js";
import type { AdminAuthenticate } from "../../admin/request.js";
import { preflight } from "../../http/cors.js";
import { toResponse } from "../../http/reply.js";
import type { LiveChatProvider } from "../provider.js";
import { feedRoute } from "./feed.js";
import { acceptRoute, closeRoute, listRoute, sendRoute, showRoute } from "./routes.js";

const BASE = "/api/v1/livechat";
const CONVERSATIONS = `${BASE}/conversations`;
const CONVERSATION = `${CONVERSATIONS}/:conversation_id`;
/** An agent console in a browser sends the admin token and the tenant. */
const HEADERS = "Authorization, Content-Type, X-Tenant-ID, Last-Event-ID";
const allow = (methods: string) => () => toResponse(preflight(methods, HEADERS));

/**
 * The built-in live-chat provider: a queue per tenant that its agents work through HTTP
 * routes behind the tenant admin JWT (the same tokens and `X-Tenant-ID` as `adminApi()`):
 *
 * - `GET /api/v1/livechat/conversations?mode=waiting|active|all`: the live chats;
 * - `GET /api/v1/livechat/conversations/{id}`: one, with its recent messages;
 * - `POST /api/v1/livechat/conversations/{id}/accept`, `/messages` (`{ content, sender? }`), `/close`;
 * - `GET /api/v1/livechat/feed`: server-sent events of handovers, messages and mode changes.
 *
 * A handover always waits for an agent here (it is never `livechat_unavailable`); it
 * expires after the channel's wait timeout.
 *
 * @example
 * const service = await createChannelService({
 *   storage,
 *   flows,
 *   livechat: liveChatInbox({ secret: process.env.CHANNELKIT_ADMIN_JWT_SECRET }),
 * });
 */
export function liveChatInbox(options: AdminAuthOptions = {}): LiveChatProvider {
  let authenticate: AdminAuthenticate = () => {
    throw new Error("channelkit: liveChatInbox() was not started: pass it as createChannelService({ livechat: liveChatInbox(...) })");
  };
  const id = (params: Record<string, string>) => params.conversation_id as string;
  return {
    name: "livechat-inbox",
    init(ctx) {
      authenticate = adminAuthenticator(options, ctx.production, ctx.logger);
    },
    routes: [
      { method: "OPTIONS", path: CONVERSATIONS, handle: allow("GET, OPTIONS") },
      { method: "GET", path: CONVERSATIONS, handle: (request, _params, ctx) => listRoute(request, ctx, authenticate) },
      { method: "OPTIONS", path: CONVERSATION, handle: allow("GET, OPTIONS") },
      { method: "GET", path: CONVERSATION, handle: (request, params, ctx) => showRoute(request, id(params), ctx, authenticate) },
      { method: "OPTIONS", path: `${CONVERSATION}/accept`, handle: allow("POST, OPTIONS") },
      { method: "POST", path: `${CONVERSATION}/accept`, handle: (request, params, ctx) => acceptRoute(request, id(params), ctx, authenticate) },
      { method: "OPTIONS", path: `${CONVERSATION}/messages`, handle: allow("POST, OPTIONS") },
      { method: "POST", path: `${CONVERSATION}/messages`, handle: (request, params, ctx) => sendRoute(request, id(params), ctx, authenticate) },
      { method: "OPTIONS", path: `${CONVERSATION}/close`, handle: allow("POST, OPTIONS") },
      { method: "POST", path: `${CONVERSATION}/close`, handle: (request, params, ctx) => closeRoute(request, id(params), ctx, authenticate) },
      { method: "OPTIONS", path: `${BASE}/feed`, handle: allow("GET, OPTIONS") },
      { method: "GET", path: `${BASE}/feed`, handle: (request, _params, ctx) => feedRoute(request, ctx, authenticate) },
    ],
  };
}
