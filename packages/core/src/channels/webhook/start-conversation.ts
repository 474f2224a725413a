import { webhookRequest } from "./channel.js";
import { botMessages, conversationRecord } from "./events.js";
import { startConversationSchema } from "./schemas.js";
import { channelFlow, type IncomingRequest, json, type Reply, runToEnd, type ServiceContext, ServiceError, validate } from "../../plugin/api.js";

/**
 * `POST /channels/webhook/{client_id}/startConversation`: opens a conversation in one of the
 * channel's languages and runs the flow's `start` (its greeting), answered whole:
 * `{ conversation: { conversation: <record>, newMessages: { newEvents } } }`.
 */
export async function startConversation(request: IncomingRequest, clientId: string, ctx: ServiceContext): Promise<Reply> {
  const { channel, body } = await webhookRequest(request, clientId, ctx);
  const input = validate(startConversationSchema, body);
  if (!channel.languages.includes(input.language)) {
    throw new ServiceError("validation_error", `language ${input.language} is not active on this channel: use one of ${channel.languages.join(", ")}`, {
      details: [{ path: "language", message: "not one of the channel's languages" }],
    });
  }
  const flow = channelFlow(ctx, channel);
  const run = await ctx.runs.start({
    channel,
    flow,
    conversation: null,
    payload: "",
    trigger: "start",
    language: input.language,
    metadata: input.integrationContext ?? {},
    request,
    live: false,
  });
  const outcome = await runToEnd(run);
  return json({
    conversation: {
      conversation: conversationRecord(outcome, channel, flow, input.language),
      newMessages: { newEvents: botMessages(outcome) },
    },
  });
}
