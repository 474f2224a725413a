import { aiChatPayloadSchema, aiChatRequestSchema, widgetChatRequestSchema } from "./schemas.js";
import { type ChannelRecord, type ConversationRecord, findOwnConversation, type ServiceContext, validate } from "../../plugin/api.js";

/** What a chat request asks to run: the user's text, and the conversation it goes on. */
export interface ChatTurn {
  payload: string;
  metadata: Record<string, unknown>;
  /** The conversation to resume, null to start one, or the AI SDK chat id whose conversation it is (created by its first message). */
  conversation: ConversationRecord | null | { externalKey: string };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Reads either body form of `POST /public/widget/chat`: the AI SDK chat request
 * (`{ id, messages, trigger }`, recognised by its `messages`) or `{ payload,
 * conversation_id?, metadata? }`, with the same 422 rules as execute.
 */
export async function chatTurn(body: unknown, channel: ChannelRecord, ctx: ServiceContext): Promise<ChatTurn> {
  if (isAiChatRequest(body)) {
    const request = validate(aiChatRequestSchema, body);
    const lastUser = [...request.messages].reverse().find((message) => message.role === "user");
    const text = (lastUser?.parts ?? [])
      .filter((part) => part.type === "text" && typeof part.text === "string")
      .map((part) => part.text as string)
      .join("");
    const payload = validate(aiChatPayloadSchema, text);
    return { payload, metadata: request.metadata ?? {}, ...(await chatConversation(request.id, channel, ctx)) };
  }
  const request = validate(widgetChatRequestSchema, body);
  const conversation = request.conversation_id ? await findOwnConversation(ctx.storage, channel, request.conversation_id) : null;
  return { payload: request.payload, metadata: request.metadata ?? {}, conversation };
}

function isAiChatRequest(body: unknown): body is Record<string, unknown> {
  return typeof body === "object" && body !== null && !Array.isArray(body) && "messages" in body && !("payload" in body);
}

/**
 * The conversation of an AI SDK chat id: the conversation of this channel with that id when
 * the id is one (a client resuming a conversation it got from `data-run`), else the chat id
 * as an external key (its conversation derived in the channel's namespace, new the first
 * time). Ids of other channels' conversations are never resumed: they name a conversation of this one.
 */
async function chatConversation(chatId: string, channel: ChannelRecord, ctx: ServiceContext): Promise<Pick<ChatTurn, "conversation">> {
  if (UUID.test(chatId)) {
    const own = await ctx.storage.findConversation(chatId.toLowerCase());
    if (own && own.channelId === channel.id && own.tenantId === channel.tenantId) return { conversation: own };
  }
  return { conversation: { externalKey: chatId } };
}
