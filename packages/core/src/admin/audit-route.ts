import type { ServiceContext } from "../context.js";
import { jsonResponse } from "../http/respond.js";
import { validate } from "../http/validate.js";
import type { RouteRequest } from "../plugins.js";
import { type AdminAuthenticate, adminRequest } from "./request.js";
import { auditRouteQuerySchema } from "./schemas.js";

/** `GET /api/v1/audit?channel_id=&limit=&cursor=`: the tenant's audit trail, newest first, `{ events, next_cursor }`. */
export async function auditRoute(request: RouteRequest, ctx: ServiceContext, authenticate: AdminAuthenticate): Promise<Response> {
  const { admin } = await adminRequest(request, ctx, authenticate);
  const params = new URL(request.url).searchParams;
  const query = validate(auditRouteQuerySchema, Object.fromEntries(params));
  return jsonResponse(
    await admin.audit({
      limit: query.limit,
      ...(query.channel_id === undefined ? {} : { channelId: query.channel_id }),
      ...(query.cursor === undefined ? {} : { cursor: query.cursor }),
    }),
  );
}
