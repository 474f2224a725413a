import { type AdminAuthenticate, adminRequest, jsonResponse, type RouteRequest, type ServiceContext } from "../../plugin/api.js";

/** `POST /api/v1/channels/{channel_id}/rotate-signing-secret`: `{ signing_secret, channel: { id, has_signing_secret } }`, the secret shown once. */
export async function rotateSigningSecretRoute(
  request: RouteRequest,
  channelId: string,
  ctx: ServiceContext,
  authenticate: AdminAuthenticate,
): Promise<Response> {
  const { admin } = await adminRequest(request, ctx, authenticate, { name: "rotate_signing_secret", channelId });
  return jsonResponse(await admin.rotateSigningSecret(channelId));
}
