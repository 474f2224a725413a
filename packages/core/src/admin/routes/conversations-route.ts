import type { z } from "zod";
import {
  type AdminAuthenticate,
  adminRequest,
  eraseEndUserBodySchema,
  type exportConversationsQuerySchema,
  jsonResponse,
  type listConversationsQuerySchema,
  parseJson,
  type Reply,
  readRawBody,
  requireJsonContentType,
  type RouteCall,
  type RouteRequest,
  type ServiceContext,
  validate,
} from "../../plugin/api.js";

type ListConversationsQuery = z.output<typeof listConversationsQuerySchema>;
type ExportConversationsQuery = z.output<typeof exportConversationsQuerySchema>;

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

/**
 * `GET /api/v1/export/conversations?channel_id&conversation_id&since&until&external_user_id`:
 * JSON Lines (`application/x-ndjson`), one `{ conversation, messages }` per line, each read
 * from the storage as the client pulls the body. A bad query is a 422 before any line; none
 * matching is a 200 with an empty body.
 */
export async function exportConversationsRoute(
  call: RouteCall<string, ExportConversationsQuery>,
  ctx: ServiceContext,
  authenticate: AdminAuthenticate,
): Promise<Reply> {
  const { admin, caller } = await adminRequest(call.request, ctx, authenticate, { name: "export_conversations", channelId: null });
  let query: ExportConversationsQuery;
  try {
    // The route's strict schema: a parameter it does not know is a 422.
    query = call.query();
  } catch (error) {
    await ctx.admin.refused(caller, "export_conversations", { tenantId: caller.tenantId, channelId: null }, error);
    throw error;
  }
  const exported = await admin.exportConversations({
    ...(query.channel_id === undefined ? {} : { channelId: query.channel_id }),
    ...(query.conversation_id === undefined ? {} : { conversationId: query.conversation_id }),
    ...(query.since === undefined ? {} : { since: query.since }),
    ...(query.until === undefined ? {} : { until: query.until }),
    ...(query.external_user_id === undefined ? {} : { externalUserId: query.external_user_id }),
  });
  const lines = exported[Symbol.asyncIterator]();
  return {
    status: 200,
    headers: { "content-type": "application/x-ndjson; charset=utf-8", "cache-control": "no-store" },
    body: {
      async pull() {
        const next = await lines.next();
        return next.done ? null : `${JSON.stringify(next.value)}\n`;
      },
      cancel() {
        void lines.return?.();
      },
    },
  };
}
