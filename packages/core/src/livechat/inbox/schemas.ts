import { z } from "zod";
import { integerParam } from "../../http/validate.js";
import { livechatConversationIdSchema } from "../schemas.js";

/** Which live chats `GET /api/v1/livechat/conversations` lists. */
export const inboxListQuerySchema = z.strictObject({
  mode: z.enum(["waiting", "active", "all"], "mode must be waiting, active or all").default("all"),
  limit: integerParam("limit", 1, 200, 50),
});

/** `GET /api/v1/livechat/conversations/{id}`: how many of its recent messages come with it. */
export const inboxConversationQuerySchema = z.strictObject({
  limit: integerParam("limit", 1, 200, 50),
});

/** Body of the accept route: optional, the id your desk gives this live chat. */
export const acceptBodySchema = z.strictObject({ livechat_conversation_id: livechatConversationIdSchema.optional() }, "the body must be a JSON object");
