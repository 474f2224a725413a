import { webhookRequest } from "./channel.js";
import { botMessages } from "./events.js";
import { newMessageSchema } from "./schemas.js";
import {
  answerOnce,
  canonicalId,
  channelFlow,
  channelFlowAfter,
  type ChannelRecord,
  type ConversationRecord,
  idempotencyKeyOf,
  type IncomingRequest,
  json,
  type KeptAnswer,
  type RegisteredFlow,
  type Reply,
  runToEnd,
  type ServiceContext,
  validate,
  findOwnConversation,
} from "../../plugin/api.js";

/**
 * `POST /channels/webhook/{client_id}/newMessage`: runs the flow on the user's input in a
 * conversation of this channel, answered whole: `{ conversation: { newEvents } }`. Runs of
 * one conversation take turns, as on execute. With an `Idempotency-Key`, once per key, as
 * execute (docs/webhook.md).
 */
export async function newMessage(request: IncomingRequest, clientId: string, ctx: ServiceContext): Promise<Reply> {
  const { channel, body } = await webhookRequest(request, clientId, ctx);
  const key = idempotencyKeyOf(request);
  const input = validate(newMessageSchema, body);
  const conversationId = canonicalId(input.conversationId);
  // Another channel's conversation is as unknown as one that does not exist: a client id
  // opens its own conversations only. The run takes its ticket only on one of them
  // (`ctx.runs.start`'s 404); a request with a key is checked first, before its key is kept.
  if (key === null) {
    const flow = await channelFlowAfter(ctx, channel, () => findOwnConversation(ctx.storage, channel, conversationId, { otherChannel: "not_found" }));
    return answer(request, ctx, channel, flow, { id: conversationId }, input.userInput, null);
  }
  const conversation = await findOwnConversation(ctx.storage, channel, conversationId, { otherChannel: "not_found" });
  const flow = channelFlow(ctx, channel);
  return answerOnce(ctx, request, { channelId: channel.id, operation: "newMessage", key, body }, (kept) =>
    answer(request, ctx, channel, flow, conversation, input.userInput, kept),
  );
}

/** Runs the flow on the user's input and answers its new events; `kept` keeps the answer of a request with a key. */
async function answer(
  request: IncomingRequest,
  ctx: ServiceContext,
  channel: ChannelRecord,
  flow: RegisteredFlow,
  conversation: Pick<ConversationRecord, "id">,
  userInput: string,
  kept: KeptAnswer | null,
): Promise<Reply> {
  const run = await ctx.runs.start({
    channel,
    flow,
    conversation,
    payload: userInput,
    request,
    live: false,
  });
  const outcome = await runToEnd(run);
  const reply = json({ conversation: { newEvents: botMessages(outcome) } });
  return kept ? kept.whole(outcome, reply, true) : reply;
}
