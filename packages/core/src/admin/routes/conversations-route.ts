import type { z } from "zod";
import {
  type AdminAuthenticate,
  adminRequest,
  eraseEndUserBodySchema,
  jsonResponse,
  type listConversationsQuerySchema,
  parseJson,
  readRawBody,
  requireJsonContentType,
  type RouteCall,
  type RouteRequest,
  type ServiceContext,
  validate,
} from "../../plugin/api.js";

type ListConversationsQuery = z.output<typeof listConversationsQuerySchema>;

/** `DELETE /api/v1/conversations/{conversation_id}`: `{ deleted: { conversation_id, messages, runs } }`. */
export async function deleteConversationRoute(
  request: RouteRequest,
  conversationId: string,
  ctx: ServiceContext,
  authenticate: AdminAuthenticate,
): Promise<Response> {
  const { admin } = await adminRequest(request, ctx, authenticate, { name: "delete_conversation", channelId: null });
  return jsonResponse(await admin.deleteConversation({ conversationId }));
}

/**
 * `POST /api/v1/end-users/erase` with `{ external_user_id }`: every conversation of the
 * tenant in which that end user took part is deleted. A body that cannot be read is a
 * refused `erase_end_user` like any other, and recorded.
 */
export async function eraseEndUserRoute(request: RouteRequest, ctx: ServiceContext, authenticate: AdminAuthenticate): Promise<Response> {
  const { admin, caller } = await adminRequest(request, ctx, authenticate, { name: "erase_end_user", channelId: null });
  let externalUserId: string;
  try {
    requireJsonContentType(request);
    externalUserId = validate(eraseEndUserBodySchema, parseJson(await readRawBody(request, ctx.maxBodyBytes))).external_user_id;
  } catch (error) {
    await ctx.admin.refused(caller, "erase_end_user", { tenantId: caller.tenantId, channelId: null }, error);
    throw error;
  }
  return jsonResponse(await admin.eraseEndUser({ externalUserId }));
}

/** `GET /api/v1/conversations?channel_id&since&until&external_user_id&limit&cursor`: the tenant's conversations, newest first. */
export async function listConversationsRoute(
  call: RouteCall<string, ListConversationsQuery>,
  ctx: ServiceContext,
  authenticate: AdminAuthenticate,
): Promise<Response> {
  const { admin } = await adminRequest(call.request, ctx, authenticate);
  // The route's strict schema: a parameter it does not know is a 422.
  const query = call.query();
  return jsonResponse(
    await admin.listConversations({
      limit: query.limit,
      ...(query.channel_id === undefined ? {} : { channelId: query.channel_id }),
      ...(query.since === undefined ? {} : { since: query.since }),
      ...(query.until === undefined ? {} : { until: query.until }),
      ...(query.external_user_id === undefined ? {} : { externalUserId: query.external_user_id }),
      ...(query.cursor === undefined ? {} : { cursor: query.cursor }),
    }),
  );
}
