import type { ServiceContext } from "../context.js";
import { jsonResponse } from "../http/respond.js";
import type { RouteRequest } from "../plugins.js";
import { type AdminAuthenticate, adminRequest } from "./request.js";

/** `GET /api/v1/channels/{channel_id}`: `{ channel }`, the channel view (archived channels included: reading is not managing). */
export async function getChannelRoute(request: RouteRequest, channelId: string, ctx: ServiceContext, authenticate: AdminAuthenticate): Promise<Response> {
  const { admin } = await adminRequest(request, ctx, authenticate);
  return jsonResponse(await admin.getChannel(channelId));
}
