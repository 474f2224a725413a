import { type AdminAuthenticate, adminRequest, jsonResponse, type RouteRequest, type ServiceContext } from "../../plugin/api.js";

/** `POST /api/v1/channels/{channel_id}/rotate-key`: `{ api_key, channel: { id, api_key_hint } }`, the key shown once. */
export async function rotateKeyRoute(request: RouteRequest, channelId: string, ctx: ServiceContext, authenticate: AdminAuthenticate): Promise<Response> {
  const { admin } = await adminRequest(request, ctx, authenticate, { name: "rotate_key", channelId });
  return jsonResponse(await admin.rotateKey(channelId));
}
