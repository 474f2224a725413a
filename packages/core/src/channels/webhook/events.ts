import type { ChannelRecord, RunOutcome } from "../../plugin/api.js";

/** An event of a webhook conversation (`eventStack`, `newEvents`). */
export type WebhookEvent = { type: "START"; data: Record<string, never>; timestamp: string } | { type: "BOT_MESSAGE"; data: BotMessageData; timestamp: string };

/** `BOT_MESSAGE.data`. */
export interface BotMessageData {
  /** The text as HTML: escaped, so that it shows as written. */
  content: string;
  rawContent: string;
  suggestions: string[];
  expectedResponseType: string;
  sources: unknown[];
}

const HTML_ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** `text` as HTML that shows it as written. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => HTML_ESCAPES[char] as string);
}

/**
 * The `BOT_MESSAGE`s of a run: one per assistant reply, with the presentation the flow gave
 * it. The expected response type defaults to `textOrSuggestion` with suggestions, else `text`.
 */
export function botMessages(outcome: RunOutcome): (WebhookEvent & { type: "BOT_MESSAGE" })[] {
  const events: (WebhookEvent & { type: "BOT_MESSAGE" })[] = [];
  outcome.produced.forEach((message, index) => {
    if (message.role !== "assistant") return;
    const options = outcome.replyOptions.get(index);
    const suggestions = options?.suggestions ?? [];
    events.push({
      type: "BOT_MESSAGE",
      data: {
        content: escapeHtml(message.content),
        rawContent: message.content,
        suggestions,
        expectedResponseType: options?.expectedResponseType ?? (suggestions.length > 0 ? "textOrSuggestion" : "text"),
        sources: options?.sources ?? [],
      },
      timestamp: message.timestamp,
    });
  });
  return events;
}

/**
 * The conversation record `startConversation` answers, after the run that opened it. Values
 * the contract leaves open are fixed in docs/webhook.md: keep them stable.
 */
export function conversationRecord(outcome: RunOutcome, channel: ChannelRecord, flow: { name: string; version: string | null }, language: string) {
  const bot = botMessages(outcome);
  const handedOver = outcome.livechatMode !== null;
  const waitsForAnswer = outcome.status === "pending";
  const lastStep = outcome.executionOrder.at(-1);
  const start: WebhookEvent = { type: "START", data: {}, timestamp: outcome.startedAt };
  return {
    id: outcome.conversationId,
    eventStack: [start, ...bot],
    context: {
      variables: outcome.variables,
      uploadedFiles: {},
      channel: { id: channel.id, version: flow.version, release: channel.environment, languages: channel.languages, channelType: "webhook" },
      language,
      // A question asked (a pause) is answered, not classified as a new intent.
      shouldClassifyNextMessage: !waitsForAnswer,
      digressionTypeNextMessage: "NONE",
      graphReaderConversationalStack:
        waitsForAnswer && lastStep !== undefined
          ? [
              {
                status: { executorType: "FLOW", statusType: handedOver ? "HANDOVER" : "WAITING_FOR_INPUT", nodeId: lastStep },
                context: { scenarioName: flow.name },
              },
            ]
          : [],
      nextMessageExpectedType: bot.at(-1)?.data.expectedResponseType ?? "text",
      entities: [],
    },
    status: handedOver ? "HANDOVER" : "ACTIVE",
    labelIds: [],
    createdAt: outcome.startedAt,
    updatedAt: outcome.completedAt,
  };
}
