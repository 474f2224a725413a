import { z } from "zod";
import { integerParam, livechatConversationIdSchema, liveChatViewSchema, messageViewSchema } from "../../plugin/api.js";

/** Which live chats `GET /api/v1/livechat/conversations` lists. */
export const inboxListQuerySchema = z.strictObject({
  mode: z
    .enum(["waiting", "active", "all"], "mode must be waiting, active or all")
    .default("all")
    .meta({ description: "Which live chats: `waiting`, `active` or `all`." }),
  limit: integerParam("limit", 1, 200, 50, "At most this many, 1 to 200."),
});

/** `GET /api/v1/livechat/conversations/{id}`: how many of its recent messages come with it. */
export const inboxConversationQuerySchema = z.strictObject({
  limit: integerParam("limit", 1, 200, 50, "The most recent messages to return, 1 to 200."),
});

/** Body of the accept route: optional, the id your desk gives this live chat. */
export const acceptBodySchema = z.strictObject({ livechat_conversation_id: livechatConversationIdSchema.optional() }, "the body must be a JSON object");

/** A conversation as the inbox's agents see it (`inboxConversationView`): its live chat now, and since when. */
export const inboxConversationViewSchema = z.object({
  conversation_id: z.uuid(),
  channel_id: z.uuid(),
  ...liveChatViewSchema.shape,
  mode_since: z.iso.datetime().meta({ description: "When the conversation entered its mode." }),
  expires_at: z.iso.datetime().nullable().meta({ description: "When a waiting conversation expires if no agent accepts it; null otherwise." }),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
});

/** `GET /api/v1/livechat/conversations`: the tenant's live chats, longest waiting first. */
export const inboxListResponseSchema = z.object({ conversations: z.array(inboxConversationViewSchema) });

/** `GET /api/v1/livechat/conversations/{id}`: one conversation with its recent messages. */
export const inboxConversationResponseSchema = z.object({ conversation: inboxConversationViewSchema, messages: z.array(messageViewSchema) });

/** The accept and close routes: the conversation as it is now. */
export const inboxConversationOnlyResponseSchema = z.object({ conversation: inboxConversationViewSchema });

/** An event of `GET /api/v1/livechat/feed`. */
export const inboxFeedEventSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("ready") }).meta({ description: "Sent once the feed listens: nothing after it is missed." }),
  z.object({ type: z.literal("handover"), conversation: inboxConversationViewSchema }).meta({ description: "A new handover." }),
  z
    .object({ type: z.literal("message"), conversation_id: z.uuid(), message: messageViewSchema })
    .meta({ description: "A message of a live chat, the user's or an agent's." }),
  z.object({ type: z.literal("mode"), conversation: inboxConversationViewSchema }).meta({ description: "A change of mode." }),
]);
