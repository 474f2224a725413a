import { channelsOf } from "./routes.js";
import { inboxConversationView } from "./views.js";
import {
  type AdminAuthenticate,
  adminRequest,
  messageView,
  type Reply,
  type RouteRequest,
  type ServiceContext,
  SSE_HEADERS,
  sseEvent,
  type TenantSignal,
  toResponse,
} from "../../plugin/api.js";

/**
 * `GET /api/v1/livechat/feed`: what the tenant's agents must see, as server-sent events, from
 * every instance: `{"type":"ready"}` once listening, then `{"type":"handover","conversation"}`
 * for each new handover, `{"type":"message","conversation_id","message"}` for each message of
 * a live chat (the user's and the agents'), `{"type":"mode","conversation"}` for each change
 * of mode (an agent accepted or closed, the user cancelled, the bot took it back).
 */
export async function feedRoute(request: RouteRequest, ctx: ServiceContext, authenticate: AdminAuthenticate): Promise<Response> {
  const { caller } = await adminRequest(request, ctx, authenticate);
  return toResponse(await ctx.openStreams.forAgent(caller.tenantId, caller.actor, () => subscribe(ctx, caller.tenantId)));
}

/** The tenant's feed as a stream, listening before it says it is ready. */
async function subscribe(ctx: ServiceContext, tenantId: string): Promise<Reply> {
  let unsubscribe: () => void = () => undefined;
  const stream = ctx.livechat.openStream(() => unsubscribe());
  const channels = channelsOf(ctx);
  // One signal at a time, in the order they came: each is read from the store.
  let reading: Promise<void> = Promise.resolve();
  const onSignal = (signal: TenantSignal) => {
    reading = reading
      .then(() => eventOf(ctx, channels, signal))
      .then(
        (event) => {
          if (event) stream.push(sseEvent(event));
        },
        (error) => ctx.logger.warn("channelkit: the live-chat feed could not read a conversation", error),
      );
  };
  unsubscribe = await ctx.livechat.subscribeTenant(tenantId, onSignal);
  if (stream.ended) unsubscribe();
  stream.push(sseEvent({ type: "ready" }));
  return { status: 200, headers: { ...SSE_HEADERS }, body: stream };
}

async function eventOf(ctx: ServiceContext, channels: ReturnType<typeof channelsOf>, signal: TenantSignal) {
  const conversation = await ctx.storage.findConversation(signal.conversation_id);
  if (!conversation) return null;
  if (signal.type === "message") {
    const turn = signal.turn_index ?? 0;
    const [message] = await ctx.storage.listMessagesAfter(conversation.id, turn - 1, 1);
    if (!message || message.turnIndex !== turn) return null;
    return { type: "message", conversation_id: conversation.id, message: messageView(message) };
  }
  return { type: signal.type, conversation: inboxConversationView(ctx.livechat, await channels(conversation.channelId), conversation) };
}
