import { defineChannelType, ServiceError } from "@channelkit/core";
import { SlackAdapter, type SlackAdapterConfig } from "@chat-adapter/slack";
import type { Adapter, ChatInstance, Logger as ChatLogger, WebhookOptions } from "chat";
import { z } from "zod";
import type { ChatPlatform } from "./platform.js";

const slackSettings = z.object({
  bot_token: z
    .string()
    .startsWith("xoxb-", "bot_token must be a bot token (xoxb-...)")
    .describe("The app's Bot User OAuth Token (xoxb-...), from OAuth & Permissions."),
  signing_secret: z.string().min(1).describe("The app's Signing Secret (Basic Information): Slack signs each delivery with it (X-Slack-Signature)."),
  api_url: z.url().optional().describe("The Web API's base URL (https://slack.com/api/); GovSlack's (https://slack-gov.com/api/), or a stand-in's in tests."),
  user_name: z.string().min(1).optional().describe("The bot's name (read from auth.test when absent)."),
});

type WebApiLogger = NonNullable<NonNullable<SlackAdapterConfig["webClientOptions"]>["logger"]>;
type WebApiLogLevel = ReturnType<WebApiLogger["getLevel"]>;

/** The Web API client's log on the channel's: its warnings and errors, nothing below (its own default writes to the console). */
function webApiLogger(logger: ChatLogger): WebApiLogger {
  let level = "warn" as WebApiLogLevel;
  const line = (messages: unknown[]) => messages.map((message) => (typeof message === "string" ? message : JSON.stringify(message))).join(" ");
  return {
    debug: () => undefined,
    info: () => undefined,
    warn: (...messages: unknown[]) => logger.warn(`Slack Web API: ${line(messages)}`),
    error: (...messages: unknown[]) => logger.error(`Slack Web API: ${line(messages)}`),
    setLevel: (value) => {
      level = value;
    },
    getLevel: () => level,
    setName: () => undefined,
  };
}

/** Slack's block_actions payload (a button pressed), as the adapter types it. */
type BlockActions = Parameters<SlackAdapter["handleBlockActions"]>[0];

/** The Slack adapter of one channel, with three of its behaviours changed (each method says why). */
class ChannelSlackAdapter extends SlackAdapter {
  /**
   * Slack's retries are answered once by the Chat SDK's claim of each message, which a
   * delivery that fails gives back (see DeliveryClaims), not by the adapter's mark of a
   * delivered event: the mark is written before the message runs and stays when the run
   * fails, so Slack's retry of a delivery answered 503 would be dropped and its message lost.
   */
  protected override markEventDelivered(): void {}

  protected override async isDuplicateEventDelivery(): Promise<boolean> {
    return false;
  }

  /**
   * A button on a message at the top of a direct message belongs to the direct message's
   * conversation (`slack:D…:`), as the messages there do; the adapter names its thread after
   * the button's message (`slack:D…:{ts}`), a conversation of its own, where the suggestion
   * it stands for is not found (and a reply would open a thread).
   */
  protected override handleBlockActions(payload: BlockActions, options?: WebhookOptions): void {
    const channel = payload.channel?.id ?? payload.container?.channel_id;
    const threaded = payload.message?.thread_ts ?? payload.container?.thread_ts;
    if (this.chat === null || channel === undefined || !channel.startsWith("D") || threaded !== undefined || payload.container?.is_ephemeral === true) {
      super.handleBlockActions(payload, options);
      return;
    }
    for (const action of payload.actions) {
      this.chat.processAction(
        {
          actionId: action.action_id,
          value: action.selected_option?.value ?? action.value,
          user: {
            userId: payload.user.id,
            userName: payload.user.username || payload.user.name || "unknown",
            fullName: payload.user.name || payload.user.username || "unknown",
            isBot: false,
            isMe: false,
          },
          messageId: payload.message?.ts ?? payload.container.message_ts,
          threadId: this.encodeThreadId({ channel, threadTs: "" }),
          adapter: this,
          raw: payload,
          triggerId: payload.trigger_id,
        },
        options,
      );
    }
  }

  /**
   * Without its own user id (auth.test failed), the bot cannot tell its messages from its
   * users' (Slack delivers the bot's own posts too) and would answer itself: it is not made,
   * the delivery answers 503, and Slack's retry makes it again.
   */
  override async initialize(chat: ChatInstance): Promise<void> {
    await super.initialize(chat);
    if (this.botUserId !== undefined) return;
    // The plugin's code: 503, and Slack sends the delivery again.
    throw new ServiceError(
      "delivery_failed",
      "Slack's auth.test did not answer the bot's user id (see the warning before this one; check the channel's bot_token and api_url): the delivery was not run, and Slack sends it again.",
    );
  }
}

/**
 * Slack: direct messages, and channel threads the bot is mentioned in, through
 * `@chat-adapter/slack` in single-workspace mode (one bot token per channel), over the Events API.
 */
export const slack: ChatPlatform<typeof slackSettings> = {
  name: "slack",
  // Slack's advice (it truncates at 40,000, and a section block holds 3,000).
  messageLimit: 4000,
  channelType: defineChannelType({
    name: "slack",
    description:
      "A Slack app's bot in one workspace: Slack's Events API delivers to POST /channels/chat/{channel_id}; a direct message conversation, or a channel thread the bot is mentioned in, is a conversation.",
    settings: slackSettings,
    secrets: ["bot_token", "signing_secret"],
  }),
  adapter: (settings, logger) =>
    // The constructor, not createSlackAdapter: the latter reads SLACK_APP_TOKEN and
    // SLACK_SOCKET_FORWARDING_SECRET from the environment when they are not given.
    new ChannelSlackAdapter({
      mode: "webhook",
      botToken: settings.bot_token,
      signingSecret: settings.signing_secret,
      webhookVerifier: undefined,
      // Each falls back to a SLACK_* variable when undefined.
      apiUrl: settings.api_url ?? "https://slack.com/api/",
      encryptionKey: "",
      // Single workspace: no OAuth, no installations (and, the bot token given, no SLACK_CLIENT_* read).
      clientId: undefined,
      clientSecret: undefined,
      installationProvider: undefined,
      // No Socket Mode: a forwarded socket event (X-Slack-Socket-Token) is refused.
      appToken: undefined,
      socketForwardingSecret: undefined,
      // From auth.test, which also answers the bot's name when user_name is absent.
      botUserId: undefined,
      userName: settings.user_name,
      agentView: false,
      // chat.startStream in threads (at the top of a direct message, the reply is posted, then
      // edited); the adapter falls back to posting and editing where Slack refuses the method.
      nativeStreaming: true,
      feedbackButtons: false,
      logger,
      webClientOptions: {
        logger: webApiLogger(logger),
        // Its default retries a rate-limited call for about 30 minutes, holding the reply (and the service's close).
        retryConfig: { retries: 2 },
        timeout: 15_000,
        rejectRateLimitedCalls: false,
      },
    }) as unknown as Adapter,
};
