import type { ServiceInternals } from "../context.js";
import { uuidV5 } from "../flows/identity.js";
import { ServiceError } from "../http/errors.js";
import type { ChannelRecord } from "../storage/types.js";
import { type StartedRun, type StartRunInput, startRun } from "./start.js";

/**
 * The conversation an external key names (a chat platform's thread, an AI SDK chat id):
 * always the same id, derived from the key in the channel's namespace (a UUIDv5), so that
 * every instance finds it without a lookup table.
 */
export function externalConversationId(channel: Pick<ChannelRecord, "id">, externalKey: string): Promise<string> {
  return uuidV5(externalKey, channel.id);
}

/**
 * Starts a run in the conversation of an external key: the existing one, or a new one with
 * the key's id. Two first messages of one key racing on two instances both run: the one that
 * loses the race to create the conversation goes on in the conversation the other created.
 */
export async function startOnExternalKey(ctx: ServiceInternals, input: StartRunInput, externalKey: string): Promise<StartedRun> {
  const { channel } = input;
  const id = await externalConversationId(channel, externalKey);
  const existing = await ctx.storage.findConversation(id);
  if (existing) {
    if (existing.channelId !== channel.id || existing.tenantId !== channel.tenantId) throw new ServiceError("conversation_not_found");
    return startRun(ctx, { ...input, conversation: { id } });
  }
  try {
    // Created as the run takes its ticket, even for a run answered whole: the race is lost here, before the flow runs.
    return await startRun(ctx, { ...input, conversation: null, newConversationId: id }, true);
  } catch (error) {
    const created = await ctx.storage.findConversation(id);
    if (!created || created.channelId !== channel.id) throw error;
    return startRun(ctx, { ...input, conversation: { id } });
  }
}
