import {
  type AdminAuthenticate,
  adminRequest,
  jsonResponse,
  parseJson,
  patchChannelBodySchema,
  readRawBody,
  requireJsonContentType,
  type RouteRequest,
  type ServiceContext,
  type UpdateChannelInput,
  validate,
} from "../../plugin/api.js";

/**
 * `PATCH /api/v1/channels/{channel_id}`: `{ channel, signing_secret? }`, the secret only when
 * `config.require_signature` went from false to true. A body that cannot be read is a refused
 * `update_channel` like any other, and recorded.
 */
export async function updateChannelRoute(request: RouteRequest, channelId: string, ctx: ServiceContext, authenticate: AdminAuthenticate): Promise<Response> {
  const { admin, caller } = await adminRequest(request, ctx, authenticate, { name: "update_channel", channelId });
  let input: UpdateChannelInput;
  try {
    requireJsonContentType(request);
    input = toUpdateInput(validate(patchChannelBodySchema, parseJson(await readRawBody(request, ctx.maxBodyBytes))));
  } catch (error) {
    await ctx.admin.refused(caller, "update_channel", { tenantId: caller.tenantId, channelId }, error);
    throw error;
  }
  return jsonResponse(await admin.updateChannel(channelId, input));
}

/** The wire's names to the admin's: only the fields the body sets. */
function toUpdateInput(body: ReturnType<typeof patchChannelBodySchema.parse>): UpdateChannelInput {
  const input: UpdateChannelInput = {};
  if (body.name !== undefined) input.name = body.name;
  if (body.state !== undefined) input.state = body.state;
  if (body.allowed_origins !== undefined) input.allowedOrigins = body.allowed_origins;
  if (body.default_stream !== undefined) input.defaultStream = body.default_stream;
  if (body.languages !== undefined) input.languages = body.languages;
  if (body.widget !== undefined) input.widget = body.widget;
  if (body.run_timeout_seconds !== undefined) input.runTimeoutSeconds = body.run_timeout_seconds;
  if (body.retention_days !== undefined) input.retentionDays = body.retention_days;
  if (body.rate_limits !== undefined) input.rateLimits = body.rate_limits;
  if (body.resumable_streams !== undefined) input.resumableStreams = body.resumable_streams;
  if (body.livechat?.status_messages !== undefined) input.livechatMessages = body.livechat.status_messages;
  if (body.livechat?.wait_timeout_seconds !== undefined) input.livechatWaitTimeoutSeconds = body.livechat.wait_timeout_seconds;
  if (body.config?.require_signature !== undefined) input.requireSignature = body.config.require_signature;
  // A plugin type's settings: merged into the stored ones and validated by the admin (`settings.<field>` when refused).
  if (body.settings !== undefined) input.settings = body.settings;
  return input;
}
