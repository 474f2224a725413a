import { type AdminAuthOptions, adminAuthenticator } from "../auth/admin-token.js";
import { preflight } from "../http/cors.js";
import { toResponse } from "../http/reply.js";
import type { ChannelPlugin } from "../plugins.js";
import { auditRoute } from "./audit-route.js";
import { getChannelRoute } from "./get-channel.js";
import type { AdminAuthenticate } from "./request.js";
import { rotateKeyRoute } from "./rotate-key.js";
import { rotateSigningSecretRoute } from "./rotate-signing-secret.js";
import { updateChannelRoute } from "./update-channel.js";

const CHANNEL_PATH = "/api/v1/channels/:channel_id";
const ROTATE_KEY_PATH = `${CHANNEL_PATH}/rotate-key`;
const ROTATE_SECRET_PATH = `${CHANNEL_PATH}/rotate-signing-secret`;
const AUDIT_PATH = "/api/v1/audit";
/** A browser console sends the admin token and the tenant: its preflight must allow both. */
const ADMIN_HEADERS = "Authorization, Content-Type, X-Tenant-ID";

const allow = (methods: string) => () => toResponse(preflight(methods, ADMIN_HEADERS));

/**
 * The admin routes: rotate a channel's key or signing secret, read and change its settings,
 * read the audit trail, each behind an admin JWT for the tenant of `X-Tenant-ID`.
 *
 * @example
 * const service = await createChannelService({
 *   storage,
 *   flows,
 *   plugins: [adminApi({ secret: process.env.CHANNELKIT_ADMIN_JWT_SECRET })],
 * });
 * // POST /api/v1/channels/{id}/rotate-key with `Authorization: Bearer <JWT>` and `X-Tenant-ID`
 */
export function adminApi(options: AdminAuthOptions = {}): ChannelPlugin {
  let authenticate: AdminAuthenticate = () => {
    throw new Error("channelkit: adminApi() was not started: mount it with createChannelService({ plugins: [adminApi(...)] })");
  };
  return {
    name: "admin",
    init(ctx) {
      authenticate = adminAuthenticator(options, ctx.production, ctx.logger);
    },
    routes: [
      { method: "OPTIONS", path: CHANNEL_PATH, handle: allow("GET, PATCH, OPTIONS") },
      { method: "GET", path: CHANNEL_PATH, handle: (request, params, ctx) => getChannelRoute(request, params.channel_id as string, ctx, authenticate) },
      { method: "PATCH", path: CHANNEL_PATH, handle: (request, params, ctx) => updateChannelRoute(request, params.channel_id as string, ctx, authenticate) },
      { method: "OPTIONS", path: ROTATE_KEY_PATH, handle: allow("POST, OPTIONS") },
      { method: "POST", path: ROTATE_KEY_PATH, handle: (request, params, ctx) => rotateKeyRoute(request, params.channel_id as string, ctx, authenticate) },
      { method: "OPTIONS", path: ROTATE_SECRET_PATH, handle: allow("POST, OPTIONS") },
      {
        method: "POST",
        path: ROTATE_SECRET_PATH,
        handle: (request, params, ctx) => rotateSigningSecretRoute(request, params.channel_id as string, ctx, authenticate),
      },
      { method: "OPTIONS", path: AUDIT_PATH, handle: allow("GET, OPTIONS") },
      { method: "GET", path: AUDIT_PATH, handle: (request, _params, ctx) => auditRoute(request, ctx, authenticate) },
    ],
  };
}
