import type { ServiceContext } from "../../context.js";
import { ServiceError } from "../../http/errors.js";
import type { IncomingRequest, Reply } from "../../http/reply.js";
import { json } from "../../http/respond.js";
import { validate } from "../../http/validate.js";
import { runToEnd, startRun } from "../../runs/start.js";
import { canonicalId } from "../api/conversation.js";
import { channelFlow } from "../flow.js";
import { webhookRequest } from "./channel.js";
import { botMessages } from "./events.js";
import { newMessageSchema } from "./schemas.js";

/**
 * `POST /channels/webhook/{client_id}/newMessage`: runs the flow on the user's input in a
 * conversation of this channel, answered whole: `{ conversation: { newEvents } }`. Runs of
 * one conversation take turns, as on execute.
 */
export async function newMessage(request: IncomingRequest, clientId: string, ctx: ServiceContext): Promise<Reply> {
  const { channel, body } = await webhookRequest(request, clientId, ctx);
  const input = validate(newMessageSchema, body);
  // Another channel's conversation is as unknown as one that does not exist: a client id
  // opens its own conversations only.
  const conversation = await ctx.storage.findConversation(canonicalId(input.conversationId));
  if (!conversation || conversation.channelId !== channel.id || conversation.tenantId !== channel.tenantId) {
    throw new ServiceError("conversation_not_found");
  }
  const run = await startRun(ctx, {
    channel,
    flow: channelFlow(ctx, channel),
    conversation,
    payload: input.userInput,
    metadata: {},
    request,
    live: false,
  });
  const outcome = await runToEnd(run);
  return json({ conversation: { newEvents: botMessages(outcome) } });
}
