import type { z } from "zod";
import { type AdminAuthenticate, adminRequest, type auditRouteQuerySchema, jsonResponse, type RouteCall, type ServiceContext } from "../../plugin/api.js";

type AuditRouteQuery = z.output<typeof auditRouteQuerySchema>;

/** `GET /api/v1/audit?channel_id=&limit=&cursor=`: the tenant's audit trail, newest first, `{ events, next_cursor }`. */
export async function auditRoute(call: RouteCall<string, AuditRouteQuery>, ctx: ServiceContext, authenticate: AdminAuthenticate): Promise<Response> {
  const { admin } = await adminRequest(call.request, ctx, authenticate);
  // The route's strict schema: a parameter it does not know is a 422.
  const query = call.query();
  return jsonResponse(
    await admin.audit({
      limit: query.limit,
      ...(query.channel_id === undefined ? {} : { channelId: query.channel_id }),
      ...(query.cursor === undefined ? {} : { cursor: query.cursor }),
    }),
  );
}
