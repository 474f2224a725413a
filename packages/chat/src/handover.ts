import type { LiveChatMessageEvent, RunEndedEvent, ServiceContext } from "@channelkit/core";
import { type Bots, PLUGIN_ID } from "./bots.js";

/** The prefix of a message from the human side, by its sender: the user reads who writes. */
const SENDERS: Record<string, string> = { agent: "Agent", supervisor: "Supervisor" };

const threadKey = (channelId: string, conversationId: string) => `${channelId}:thread-of:${conversationId}`;

/**
 * Remembers the platform thread of a conversation its flow handed over to a human, from the
 * run's metadata: the human's messages go to that thread. Written only on a handover, so
 * the usual run costs no write.
 */
export async function rememberThread(bots: Bots, event: RunEndedEvent, ctx: ServiceContext): Promise<void> {
  if (!bots.platformOf(event.channel) || event.outcome.livechatMode === null) return;
  const threadId = event.metadata.platform_thread_id;
  if (typeof threadId === "string") await ctx.storage.pluginStore(PLUGIN_ID).set(threadKey(event.channel.id, event.conversationId), threadId);
}

/** Posts a message of the human side of a live chat (an agent's reply) in the conversation's platform thread. */
export async function postHumanMessage(bots: Bots, event: LiveChatMessageEvent, ctx: ServiceContext): Promise<void> {
  const platform = bots.platformOf(event.channel);
  if (!platform || event.message.content === "") return;
  const threadId = await ctx.storage.pluginStore(PLUGIN_ID).get<string>(threadKey(event.channel.id, event.conversationId));
  if (threadId === undefined) {
    ctx.logger.warn(
      `channelkit chat: conversation ${event.conversationId} of channel ${event.channel.id} has no platform thread; a live-chat message is not posted`,
    );
    return;
  }
  const chat = await bots.of(ctx, event.channel, platform);
  const sender = SENDERS[event.message.sender ?? ""];
  await chat.thread(threadId).post(sender === undefined ? event.message.content : `${sender}: ${event.message.content}`);
}
