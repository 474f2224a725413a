import type { ServiceContext } from "../context.js";
import { jsonResponse } from "../http/respond.js";
import type { RouteRequest } from "../plugins.js";
import { type AdminAuthenticate, adminRequest } from "./request.js";

/** `POST /api/v1/channels/{channel_id}/rotate-key`: `{ api_key, channel: { id, api_key_hint } }`, the key shown once. */
export async function rotateKeyRoute(request: RouteRequest, channelId: string, ctx: ServiceContext, authenticate: AdminAuthenticate): Promise<Response> {
  const { admin } = await adminRequest(request, ctx, authenticate, { name: "rotate_key", channelId });
  return jsonResponse(await admin.rotateKey(channelId));
}
