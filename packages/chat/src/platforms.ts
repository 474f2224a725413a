import { defineChannelType, type Logger } from "@channelkit/core";
import { createTelegramAdapter } from "@chat-adapter/telegram";
import { createWhatsAppAdapter } from "@chat-adapter/whatsapp";
import type { Adapter, Logger as ChatLogger } from "chat";
import { z } from "zod";

/**
 * A chat platform: the channel type its channels have, and how to make the Chat SDK's
 * adapter of one channel from that channel's settings. Every option is passed explicitly:
 * an adapter's options fall back to process-wide environment variables
 * (`TELEGRAM_BOT_TOKEN`, ...), which would mix up the tenants of one service.
 */
export interface ChatPlatform<Settings extends z.ZodObject = z.ZodObject> {
  /** The adapter's name in the Chat SDK (`telegram`), which is also the channel type's. */
  name: string;
  channelType: ReturnType<typeof defineChannelType<Settings>>;
  adapter(settings: z.infer<Settings>, logger: ChatLogger): Adapter;
}

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

const whatsAppSettings = z.object({
  access_token: z.string().min(1).describe("The System User access token of the WhatsApp Cloud API."),
  app_secret: z.string().min(1).describe("The Meta app's secret: each delivery is signed with it (X-Hub-Signature-256)."),
  verify_token: z.string().min(1).describe("The token Meta sends back when it verifies the webhook (GET with hub.verify_token)."),
  phone_number_id: z.string().min(1).describe("The WhatsApp Business phone number's id (not the number itself)."),
  api_url: z.url().optional().describe("The Graph API's base URL (https://graph.facebook.com); a stand-in's in tests."),
  api_version: z
    .string()
    .regex(/^v\d+\.\d+$/, "api_version must look like v25.0")
    .optional()
    .describe("The Graph API version (v25.0 by default)."),
});

/** WhatsApp: one conversation per user of the business number, through `@chat-adapter/whatsapp` (Cloud API). */
export const whatsApp: ChatPlatform<typeof whatsAppSettings> = {
  name: "whatsapp",
  channelType: defineChannelType({
    name: "whatsapp",
    description:
      "A WhatsApp Business number (Cloud API): Meta delivers to POST /channels/chat/{channel_id} and verifies it with GET; each user is a conversation.",
    settings: whatsAppSettings,
    secrets: ["access_token", "app_secret", "verify_token"],
  }),
  adapter: (settings, logger) =>
    createWhatsAppAdapter({
      accessToken: settings.access_token,
      appSecret: settings.app_secret,
      verifyToken: settings.verify_token,
      phoneNumberId: settings.phone_number_id,
      apiUrl: settings.api_url ?? "https://graph.facebook.com",
      apiVersion: settings.api_version ?? "v25.0",
      userName: "channelkit",
      logger,
    }) as unknown as Adapter,
};

/** The platforms `chatChannels()` serves by default. */
export const PLATFORMS: readonly ChatPlatform[] = [telegram as unknown as ChatPlatform, whatsApp as unknown as ChatPlatform];

/** The Chat SDK's logger on the service's: its warnings and errors, nothing below. */
export function chatLogger(logger: Logger, prefix = "channelkit chat"): ChatLogger {
  return {
    child: (name) => chatLogger(logger, `${prefix} ${name}`),
    debug: () => undefined,
    info: () => undefined,
    warn: (message, ...details) => logger.warn(`${prefix}: ${message}`, ...details),
    error: (message, ...details) => logger.error(`${prefix}: ${message}`, ...details),
  };
}
