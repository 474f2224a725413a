import type { AuditOperation } from "../admin/audit.js";
import type { AdminCaller, ChannelAdmin } from "../admin/operations.js";
import type { ServiceContext } from "../context.js";
import { ServiceError } from "../http/errors.js";
import type { RouteRequest } from "../plugins.js";
import type { AdminCredentials } from "./admin-token.js";

/** Authenticates an admin request (see `adminAuthenticator`). */
export type AdminAuthenticate = (request: RouteRequest) => Promise<AdminCredentials>;

/** An admin request once authenticated: its caller, and the operations acting for it on its tenant only. */
export interface AdminRequest {
  caller: AdminCaller & { tenantId: string };
  admin: ChannelAdmin;
}

/**
 * Authenticates an admin request and confines it to its tenant. A refusal for lack of a
 * verified token (401) is not recorded, since nobody is known to record; a verified token
 * that does not grant the tenant (403) is counted against the token's own limit, and
 * recorded under that tenant for the `operation` it attempted (reads name none), its actor
 * marked as not granted the tenant.
 */
export async function adminRequest(
  request: RouteRequest,
  ctx: ServiceContext,
  authenticate: AdminAuthenticate,
  operation?: { name: AuditOperation; channelId: string | null },
): Promise<AdminRequest> {
  const credentials = await authenticate(request);
  const caller = { actor: credentials.actor, via: "http" as const, tenantId: credentials.tenantId };
  if (!credentials.allowed) {
    // Counted against the token, not the tenant it named; recorded in that tenant's trail
    // (its admins see the attempt) under an actor that says the token is not one of theirs.
    await ctx.limits.forRefusedAdmin(request, credentials.actor);
    const error = new ServiceError("forbidden");
    const outsider = { ...caller, actor: `${credentials.actor ?? "a token without a subject"} (not granted this tenant)` };
    if (operation) await ctx.admin.refused(outsider, operation.name, { tenantId: caller.tenantId, channelId: operation.channelId }, error);
    throw error;
  }
  await ctx.limits.forTenant(request, credentials.tenantId);
  return { caller, admin: ctx.admin.as(caller) };
}
