import { BRIDGE_SIGNATURE_HEADER } from "./deliveries.js";
import { bridgeEventSchema } from "./schemas.js";
import {
  jsonResponse,
  liveChatView,
  parseJson,
  readRawBody,
  requireJsonContentType,
  type RouteRequest,
  type ServiceContext,
  validate,
  verifySignature,
} from "../../plugin/api.js";

/**
 * `POST /api/v1/livechat/bridge/events`: the human side's events, signed with the bridge's
 * secret over the raw body (checked before the JSON is read, as on execute). Answers the
 * conversation's live chat as it is now, or `{ message }` for a message.
 */
export async function bridgeEventRoute(request: RouteRequest, ctx: ServiceContext, secret: string): Promise<Response> {
  const raw = await readRawBody(request, ctx.maxBodyBytes);
  await verifySignature(request.headers.get(BRIDGE_SIGNATURE_HEADER), secret, raw, undefined, "X-Channelkit-Signature");
  requireJsonContentType(request);
  const event = validate(bridgeEventSchema, parseJson(raw));
  const id = event.conversation_id;
  switch (event.type) {
    case "agent_joined": {
      const options = event.livechat_conversation_id === undefined ? {} : { livechatConversationId: event.livechat_conversation_id };
      return jsonResponse({ conversation_id: id, ...liveChatView(await ctx.livechat.accept(id, options)) });
    }
    case "agent_message": {
      const { content, sender, id: messageId } = event.message;
      const message = await ctx.livechat.send(id, { content, sender, ...(messageId === undefined ? {} : { livechat_message_id: messageId }) });
      return jsonResponse({ message });
    }
    case "closed":
      return jsonResponse({ conversation_id: id, ...liveChatView(await ctx.livechat.close(id)) });
    case "unavailable":
      return jsonResponse({ conversation_id: id, ...liveChatView(await ctx.livechat.unavailable(id)) });
  }
}
