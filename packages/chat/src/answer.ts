import { channelFlow, type RunFlowInput, type RunOutcome, ServiceError, type ServiceContext, type StartedRun } from "@channelkit/core";
import type { Author, Message, SentMessage, Thread } from "chat";
import { currentClaims } from "./claims.js";
import type { ChatPlatform } from "./platforms/platform.js";
import { offerSuggestions } from "./suggestions.js";

/** What a run answers: a platform message, or a suggestion's button pressed (its label as the text). */
export interface Incoming {
  id: Message["id"];
  text: string;
  author: Pick<Author, "userId" | "userName">;
}

/** What the user reads when a run failed: the detail is in the log, never on the platform. */
export const FAILED_REPLY = "Sorry, something went wrong. Please try again.";

/**
 * Answers one platform message: a run of the channel's flow in the conversation of the
 * message's thread (created by the thread's first message), its text posted to the thread as
 * it is produced (the adapter's native streaming, or a post then edits). Runs of one thread
 * take turns across instances, so a burst is answered message after message, in order.
 *
 * Resolves once the run has taken its turn in the conversation: the route answers the
 * platform then, so that the order of the platform's deliveries is the order of the runs.
 * The reply goes on after it, and `service.close()` waits for it.
 */
export async function answer(ctx: ServiceContext, channelId: string, platform: ChatPlatform, thread: Thread, message: Incoming): Promise<void> {
  // Read again: the channel's flow or state may have changed since its bot was made.
  const channel = await ctx.storage.findChannel(channelId);
  if (!channel || channel.state !== "active") return;
  const ids = {
    platform: platform.name,
    platform_thread_id: thread.id,
    platform_message_id: message.id,
    platform_user_id: message.author.userId,
    platform_user_name: message.author.userName,
  };
  const input: RunFlowInput = {
    channel,
    flow: channelFlow(ctx, channel),
    conversation: { externalKey: thread.id },
    payload: message.text,
    // The flow reads the platform's ids as ctx.metadata; history shows them on the user's message.
    metadata: ids,
    messageMetadata: ids,
    request: null,
    live: true,
  };
  const run = await ctx.runs.start(input);
  currentClaims()?.answered(platform.name, message.id);
  const release = ctx.runs.hold();
  void reply(ctx, input, thread, run, platform.messageLimit)
    .catch((error: unknown) => ctx.logger.error(`channelkit chat: the reply to message ${message.id} (channel ${channelId}) could not be posted`, error))
    .finally(release);
}

/**
 * Posts a run's reply. A run that waited for its turn longer than the service allows
 * (`turnWaitTimeoutMs`) is given up without its user message, and an API client is told to
 * send it again; the platform was already answered, so the message takes a new turn here
 * instead of being lost.
 */
async function reply(ctx: ServiceContext, input: RunFlowInput, thread: Thread, started: StartedRun, limit: number): Promise<void> {
  let run = started;
  for (;;) {
    try {
      return await post(ctx, input.channel.id, thread, run, limit);
    } catch (error) {
      if (!(error instanceof ServiceError && error.code === "conversation_busy")) throw error;
      ctx.logger.warn(`channelkit chat: run ${run.runId} (channel ${input.channel.id}) waited too long for its turn; its message takes a new one`);
      run = await ctx.runs.start(input);
    }
  }
}

async function post(ctx: ServiceContext, channelId: string, thread: Thread, run: StartedRun, limit: number): Promise<void> {
  const reply = new ReplyText(run);
  // Nothing is posted for a run that wrote nothing (a flow that only handed over); a reply
  // longer than the platform's messages is posted as several.
  let sent: SentMessage | null = null;
  while (await reply.hasText()) sent = await thread.post(reply.text(limit));
  const outcome = await reply.outcome();
  if (outcome.status === "error") {
    ctx.logger.error(`channelkit chat: run ${run.runId} of channel ${channelId} failed: ${outcome.error ?? "unknown error"}`);
    if (!reply.wrote) await thread.post(FAILED_REPLY);
    return;
  }
  const suggestions = lastSuggestions(outcome);
  if (suggestions.length > 0) await offerSuggestions(ctx, channelId, thread, { sent, text: reply.posted }, suggestions);
}

/** The suggestions of the run's last reply that has any. */
function lastSuggestions(outcome: RunOutcome): string[] {
  let last: string[] = [];
  let at = -1;
  for (const [index, options] of outcome.replyOptions) {
    if (index > at && options.suggestions !== undefined && options.suggestions.length > 0) [at, last] = [index, options.suggestions];
  }
  return last;
}

/** A run's text as the platform shows it: its text parts in order, a blank line between messages. */
class ReplyText {
  readonly #run: StartedRun;
  #pending: string[] = [];
  #outcome: RunOutcome | undefined;
  #parts = 0;
  wrote = false;
  /** The text of the message being posted, or last posted. */
  posted = "";

  constructor(run: StartedRun) {
    this.#run = run;
  }

  /** Pulls the run until the next message's text (blank space between messages skipped), or its end. */
  async hasText(): Promise<boolean> {
    for (;;) {
      while (this.#pending.length > 0 && (this.#pending[0] as string).trim() === "") this.#pending.shift();
      if (this.#pending.length > 0) return true;
      if (this.#outcome !== undefined) return false;
      await this.#pull();
    }
  }

  /**
   * The text of one message, at most `limit` characters: it ends before a piece that would
   * pass the limit (a piece longer than it is cut), which the next message starts with.
   */
  async *text(limit: number): AsyncIterable<string> {
    this.posted = "";
    for (;;) {
      while (this.#pending.length > 0) {
        const room = limit - this.posted.length;
        let piece = this.#pending[0] as string;
        if (piece.length > room) {
          if (this.posted !== "" && piece.length <= limit) return;
          this.#pending[0] = piece.slice(room);
          piece = piece.slice(0, room);
        } else {
          this.#pending.shift();
        }
        this.posted += piece;
        yield piece;
        if (this.posted.length >= limit) return;
      }
      if (this.#outcome !== undefined) return;
      await this.#pull();
    }
  }

  async outcome(): Promise<RunOutcome> {
    while (this.#outcome === undefined) await this.#pull();
    return this.#outcome;
  }

  async #pull(): Promise<void> {
    const next = await this.#run.steps.next();
    if (next.done) {
      this.#outcome = next.value;
      return;
    }
    const part = next.value;
    if (part.type === "text-start" && this.#parts++ > 0) this.#pending.push("\n\n");
    if (part.type === "text-delta" && part.delta !== "") {
      this.#pending.push(part.delta);
      this.wrote = true;
    }
  }
}
