import {
  type ChannelRecord,
  checkChannelSignature,
  type IncomingRequest,
  parseJson,
  readRawBody,
  requireJsonContentType,
  type ServiceContext,
  ServiceError,
} from "../../plugin/api.js";

/**
 * The webhook channel of `clientId` and the request's JSON body, with the checks of both
 * webhook routes, first failure wins: the channel (`404 channel_not_found`, `410
 * channel_archived`, `409 channel_inactive`), the body (`415`, `413`), the signature when
 * the channel requires one (as on execute, over the raw bytes), then the JSON (`422`).
 */
export async function webhookRequest(request: IncomingRequest, clientId: string, ctx: ServiceContext): Promise<{ channel: ChannelRecord; body: unknown }> {
  const channel = await ctx.storage.findChannelByClientId(clientId);
  // The client id is the webhook's credential: an unknown one counts as a failed authentication.
  if (!channel || channel.type !== "webhook")
    throw await ctx.limits.failedAuthentication(request, new ServiceError("channel_not_found", "No webhook channel has this client id."));
  if (channel.state === "archived") throw new ServiceError("channel_archived");
  if (channel.state === "inactive") throw new ServiceError("channel_inactive");
  await ctx.limits.forWebhook(request, channel);
  requireJsonContentType(request);
  const raw = await readRawBody(request, ctx.maxBodyBytes);
  if (channel.requireSignature) await checkChannelSignature(request, channel, raw, ctx);
  return { channel, body: parseJson(raw) };
}
