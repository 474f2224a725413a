import {
  authenticateRequest,
  type ChannelRecord,
  conversationOrDetail,
  type IncomingRequest,
  isDetailReply,
  liveChatView,
  messageView,
  type PushStream,
  type Reply,
  type ServiceContext,
  ServiceError,
  SSE_HEADERS,
  sseEvent,
} from "../../plugin/api.js";

/** Messages read per query when a subscription catches up. */
const PAGE = 100;

/**
 * `GET /public/v1/api/conversations/{conversation_id}/events`: the conversation's live chat
 * as server-sent events, with the checks of history. First `{"type":"mode",...}` (the mode
 * now, its status message, the live chat's id); then each message of the human side and of
 * the user to it (`origin: "livechat"`) as `{"type":"message","message":{...}}` with its
 * turn index as the event id, and each change of mode. `?after=<turn_index>` (or
 * `Last-Event-ID`, which a reconnecting client sends) replays what came after that turn;
 * without it the stream starts from now.
 */
export async function conversationEvents(request: IncomingRequest, conversationId: string, ctx: ServiceContext): Promise<Reply> {
  const found = await authenticateRequest(request, ctx);
  const { channel } = found;
  const conversation = await conversationOrDetail(ctx.storage, channel, conversationId);
  if (isDetailReply(conversation)) return conversation;
  const after = afterTurn(request) ?? conversation.nextTurn - 1;
  return ctx.openStreams.forKey(request, found, () => subscribe(ctx, channel, conversationId, after));
}

/** The subscription's stream, listening before its first read: nothing that happens in between is missed. */
async function subscribe(ctx: ServiceContext, channel: ChannelRecord, conversationId: string, after: number): Promise<Reply> {
  let unsubscribe: () => void = () => undefined;
  const stream = ctx.livechat.openStream(() => unsubscribe());
  const watcher = new ConversationWatcher(ctx, channel, conversationId, after, stream);
  const stop = await ctx.livechat.subscribe(conversationId, () => watcher.refresh());
  unsubscribe = () => {
    stop();
    watcher.stop();
  };
  if (stream.ended) unsubscribe();
  watcher.refresh();
  return { status: 200, headers: { ...SSE_HEADERS }, body: stream };
}

/** `?after=` or `Last-Event-ID`: a turn index from -1 (everything) on, or null for "from now". */
function afterTurn(request: IncomingRequest): number | null {
  const raw = new URL(request.url).searchParams.get("after") ?? request.headers.get("last-event-id");
  if (raw === null || raw === "") return null;
  if (!/^-?\d+$/.test(raw) || Number(raw) < -1 || !Number.isSafeInteger(Number(raw))) {
    throw new ServiceError("validation_error", "after (or Last-Event-ID) must be a turn index, an integer from -1");
  }
  return Number(raw);
}

/**
 * Reads what changed in a conversation each time the feed rings (and when a wait is due to
 * expire, which nothing rings for), one read at a time: a ring during a read makes one more.
 */
class ConversationWatcher {
  #after: number;
  #mode: string | null = null;
  #reading = false;
  #again = false;
  #expiry: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly ctx: ServiceContext,
    private readonly channel: ChannelRecord,
    private readonly conversationId: string,
    after: number,
    private readonly stream: PushStream,
  ) {
    this.#after = after;
  }

  refresh(): void {
    if (this.#reading) {
      this.#again = true;
      return;
    }
    this.#reading = true;
    void this.#readAll();
  }

  stop(): void {
    clearTimeout(this.#expiry);
  }

  async #readAll(): Promise<void> {
    do {
      this.#again = false;
      try {
        await this.#read();
      } catch (error) {
        this.ctx.logger.warn("channelkit: a live-chat subscription could not read its conversation", error);
      }
    } while (this.#again && !this.stream.ended);
    this.#reading = false;
  }

  async #read(): Promise<void> {
    const { storage, livechat } = this.ctx;
    const conversation = await storage.findConversation(this.conversationId);
    if (!conversation || this.stream.ended) return;
    const state = livechat.state(this.channel, conversation);
    const first = this.#mode === null;
    // The mode comes first when the stream opens; after that, the messages that led to it do.
    if (first) this.#sendMode(state);
    for (;;) {
      const messages = await storage.listMessagesAfter(this.conversationId, this.#after, PAGE);
      for (const message of messages) {
        this.#after = message.turnIndex;
        if (message.origin === "livechat") this.stream.push(sseEvent({ type: "message", message: messageView(message) }, message.turnIndex));
      }
      if (messages.length < PAGE) break;
    }
    if (!first && state.mode !== this.#mode) this.#sendMode(state);
    clearTimeout(this.#expiry);
    if (state.mode === "livechat_waiting") {
      // Nothing is written when a wait expires: look again when it does.
      const due = Date.parse(conversation.modeSince) + livechat.waitTimeoutMs(this.channel) - Date.now();
      this.#expiry = setTimeout(() => this.refresh(), Math.max(0, due) + 5);
      (this.#expiry as { unref?: () => void }).unref?.();
    }
  }

  #sendMode(state: ReturnType<ServiceContext["livechat"]["state"]>): void {
    this.#mode = state.mode;
    this.stream.push(sseEvent({ type: "mode", ...liveChatView(state) }));
  }
}
