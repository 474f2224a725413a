import type { ConversationMode } from "../storage/types.js";

/**
 * What moves a conversation between the bot and a human: a run's handover (with whether a
 * provider can take it), the agent joining or closing, the user cancelling or writing, and
 * the wait running out.
 */
export type ModeEvent =
  | { type: "handover"; available: boolean }
  | { type: "agent_joined" }
  | { type: "agent_closed" }
  | { type: "user_cancelled" }
  | { type: "wait_expired" }
  | { type: "provider_unavailable" }
  | { type: "user_message" };

/** The outcome of an event: the conversation's next mode and whether the flow runs, or why the event does not apply. */
export type ModeTransition = { to: ConversationMode; runsFlow: boolean } | { refused: string };

/** Modes where a human has the conversation: a user's message goes to them, not to the flow. */
const WITH_HUMAN: ReadonlySet<ConversationMode> = new Set(["livechat_waiting", "livechat_active"]);
/** Modes a live chat ends in: the next user message gives the conversation back to the bot. */
const ENDED: ReadonlySet<ConversationMode> = new Set(["livechat_closed", "livechat_expired", "livechat_cancelled", "livechat_unavailable"]);

/** Whether a human has (or is about to have) the conversation, so that the flow must not run. */
export function withHuman(mode: ConversationMode): boolean {
  return WITH_HUMAN.has(mode);
}

/**
 * The one mode machine of live chat (decisions.md, "Live chat"), pure: every channel and
 * provider asks it, and the storage applies its answer with a compare-and-set on the mode
 * read, so that two instances cannot both move one conversation.
 */
export function nextMode(mode: ConversationMode, event: ModeEvent): ModeTransition {
  switch (event.type) {
    case "user_message":
      if (WITH_HUMAN.has(mode)) return { to: mode, runsFlow: false };
      return { to: "bot", runsFlow: true };
    case "handover":
      // A flow hands over from a run, and a flow runs only in bot mode.
      if (mode !== "bot") return { refused: `a handover happens in bot mode, not in ${mode}` };
      return { to: event.available ? "livechat_waiting" : "livechat_unavailable", runsFlow: false };
    case "agent_joined":
      if (mode !== "livechat_waiting") return { refused: `an agent joins a waiting conversation, not one in ${mode}` };
      return { to: "livechat_active", runsFlow: false };
    case "agent_closed":
      if (mode !== "livechat_active") return { refused: `an agent closes an active live chat, not one in ${mode}` };
      return { to: "livechat_closed", runsFlow: false };
    case "user_cancelled":
      if (!WITH_HUMAN.has(mode)) return { refused: `there is no live chat to cancel in ${mode}` };
      return { to: "livechat_cancelled", runsFlow: false };
    case "provider_unavailable":
      // A provider that took the handover and then finds no agent gives the conversation back.
      if (mode !== "livechat_waiting") return { refused: `only a waiting conversation becomes unavailable, not one in ${mode}` };
      return { to: "livechat_unavailable", runsFlow: false };
    case "wait_expired":
      if (mode !== "livechat_waiting") return { refused: `only a waiting conversation expires, not one in ${mode}` };
      return { to: "livechat_expired", runsFlow: false };
  }
}

/** Whether the live chat ended (closed, expired, cancelled or unavailable). */
export function liveChatEnded(mode: ConversationMode): boolean {
  return ENDED.has(mode);
}

/** The default wait for an agent before a waiting conversation expires. */
export const DEFAULT_WAIT_TIMEOUT_MS = 10 * 60 * 1000;

/**
 * The mode a conversation is in at `nowMs`, from what is stored: a conversation waiting
 * since `sinceIso` for longer than the timeout has expired, on every instance alike, with
 * no timer anywhere (the store records the expiry the next time it writes the conversation).
 */
export function modeAt(mode: ConversationMode, sinceIso: string, nowMs: number, waitTimeoutMs = DEFAULT_WAIT_TIMEOUT_MS): ConversationMode {
  if (mode !== "livechat_waiting") return mode;
  return nowMs - Date.parse(sinceIso) >= waitTimeoutMs ? "livechat_expired" : mode;
}
