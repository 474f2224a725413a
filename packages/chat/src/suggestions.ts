import type { ServiceContext } from "@channelkit/core";
import { Actions, Button, Card, CardText, type SentMessage, type Thread } from "chat";
import { PLUGIN_ID } from "./bots.js";

/** The action id of a suggestion's button; its value is the suggestion's place in the list. */
export const SUGGESTION_ACTION = "channelkit-suggestion";

/** How long a thread's suggestions can be chosen. */
const SUGGESTIONS_TTL_MS = 7 * 24 * 60 * 60 * 1000;

/** What a card of suggestions says when it cannot be the reply itself (a platform that does not edit). */
export const SUGGESTIONS_PROMPT = "Choose one:";

const suggestionsKey = (channelId: string, threadId: string) => `${channelId}:suggestions:${threadId}`;

/**
 * Offers a reply's suggestions as buttons: the reply posted is edited to carry them where the
 * platform edits messages (Telegram's inline keyboard, Slack's blocks), else they come in a
 * message of their own. They are kept by thread (any instance may take the click), and a
 * button's value is only the suggestion's place: platforms bound a button's data (Telegram:
 * 64 bytes), not a suggestion's text.
 */
export async function offerSuggestions(
  ctx: ServiceContext,
  channelId: string,
  thread: Thread,
  reply: { sent: SentMessage | null; text: string },
  suggestions: string[],
): Promise<void> {
  await ctx.storage.pluginStore(PLUGIN_ID).set(suggestionsKey(channelId, thread.id), suggestions, { ttlMs: SUGGESTIONS_TTL_MS });
  const buttons = Actions(suggestions.map((label, i) => Button({ id: SUGGESTION_ACTION, label, value: String(i) })));
  if (reply.sent !== null && reply.text !== "") {
    try {
      await reply.sent.edit(Card({ children: [CardText(reply.text), buttons] }));
      return;
    } catch {
      // The platform does not edit messages (WhatsApp): the buttons come on their own.
    }
  }
  await thread.post(Card({ children: [CardText(SUGGESTIONS_PROMPT), buttons] }));
}

/** The suggestion a button chose, or undefined once forgotten (or for a value that names none). */
export async function chosenSuggestion(ctx: ServiceContext, channelId: string, threadId: string, value: string | undefined): Promise<string | undefined> {
  const suggestions = await ctx.storage.pluginStore(PLUGIN_ID).get<string[]>(suggestionsKey(channelId, threadId));
  const index = Number(value);
  return Number.isInteger(index) ? suggestions?.[index] : undefined;
}
