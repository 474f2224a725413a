import { type AdminAuthenticate, adminRequest, jsonResponse, type RouteRequest, type ServiceContext } from "../../plugin/api.js";

/** `GET /api/v1/channels/{channel_id}`: `{ channel }`, the channel view (archived channels included: reading is not managing). */
export async function getChannelRoute(request: RouteRequest, channelId: string, ctx: ServiceContext, authenticate: AdminAuthenticate): Promise<Response> {
  const { admin } = await adminRequest(request, ctx, authenticate);
  return jsonResponse(await admin.getChannel(channelId));
}
