import { defineChannelType } from "@channelkit/core";
import { createTelegramAdapter } from "@chat-adapter/telegram";
import type { Adapter } from "chat";
import { z } from "zod";
import type { ChatPlatform } from "./platform.js";

const telegramSettings = z.object({
  bot_token: z.string().min(1).describe("The bot's token from @BotFather."),
  secret_token: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,256}$/, "secret_token must be 1 to 256 characters of A-Z, a-z, 0-9, _ and -")
    .describe("The secret given to Telegram's setWebhook: Telegram sends it in X-Telegram-Bot-Api-Secret-Token with every update."),
  user_name: z.string().min(1).optional().describe("The bot's username, without @ (read from getMe when absent)."),
  api_url: z.url().optional().describe("The Bot API's base URL (https://api.telegram.org); a local Bot API server's, or a stand-in's in tests."),
});

/** Telegram: private chats, groups and topics, through `@chat-adapter/telegram` in webhook mode. */
export const telegram: ChatPlatform<typeof telegramSettings> = {
  name: "telegram",
  // Telegram's 4,096 characters, with room for the markup.
  messageLimit: 4000,
  channelType: defineChannelType({
    name: "telegram",
    description: "A Telegram bot: its updates arrive at POST /channels/chat/{channel_id}, each chat is a conversation.",
    settings: telegramSettings,
    secrets: ["bot_token", "secret_token"],
  }),
  adapter: (settings, logger) =>
    createTelegramAdapter({
      botToken: settings.bot_token,
      secretToken: settings.secret_token,
      apiUrl: settings.api_url ?? "https://api.telegram.org",
      // Webhook only: "auto" may start polling for updates, which belong to the route.
      mode: "webhook",
      allowedUserIds: [],
      mentionOnReply: false,
      nativeStreaming: false,
      logger,
      ...(settings.user_name === undefined ? {} : { userName: settings.user_name }),
    }) as unknown as Adapter,
};
