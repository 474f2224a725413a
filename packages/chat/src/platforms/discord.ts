import { AsyncLocalStorage } from "node:async_hooks";
import { defineChannelType } from "@channelkit/core";
import { DiscordAdapter, DiscordContentFormat } from "@chat-adapter/discord";
import type { Adapter, ChatInstance, WebhookOptions } from "chat";
import { z } from "zod";
import type { ChatPlatform } from "./platform.js";

const discordSettings = z.object({
  bot_token: z.string().min(1).describe("The bot's token (Developer Portal, Bot): the REST API's credential, and the one the Gateway listener forwards with."),
  public_key: z
    .string()
    .regex(/^[0-9a-fA-F]{64}$/, "public_key must be the application's public key: 64 hexadecimal characters")
    .describe("The application's public key (General Information): Discord signs each interaction with it (X-Signature-Ed25519)."),
  application_id: z
    .string()
    .regex(/^\d{1,20}$/, "application_id must be the application's id (digits)")
    .describe("The application's id (General Information), which is also the bot user's id."),
  api_url: z.url().optional().describe("The REST API's base URL (https://discord.com/api/v10); a stand-in's in tests."),
});

/**
 * The Discord adapter of one channel. A forwarded Gateway message reaches the Chat SDK through
 * `processMessage` with its delivery's options, as the SDK asks of adapters, and not through
 * the deprecated `handleIncomingMessage` the adapter calls, which loses the delivery: the
 * adapter logs a failed message and drops it ("Error handling forwarded message"), the route
 * answers 200, the message's claim stays, and the same message forwarded again is taken for a
 * duplicate. Now a message whose run cannot start fails its delivery (503, its claim given
 * back), and forwarding it again runs it.
 */
class ChannelDiscordAdapter extends DiscordAdapter {
  readonly #delivery = new AsyncLocalStorage<WebhookOptions | undefined>();

  override handleWebhook(request: Request, options?: WebhookOptions): Promise<Response> {
    return this.#delivery.run(options, () => super.handleWebhook(request, options));
  }

  override initialize(chat: ChatInstance): Promise<void> {
    const delivery = this.#delivery;
    const relay = new Proxy(chat, {
      get(target, property) {
        if (property === "handleIncomingMessage") {
          return (...[adapter, threadId, message]: Parameters<ChatInstance["handleIncomingMessage"]>) =>
            target.processMessage(adapter, threadId, message, delivery.getStore());
        }
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    return super.initialize(relay);
  }
}

/**
 * Discord: direct messages, and guild channels where the bot is mentioned (it answers in a
 * thread it starts on the message), through `@chat-adapter/discord`. Discord sends messages
 * only over its Gateway websocket: a listener the host runs forwards them to the channel's
 * route (the adapter's `startGatewayListener`), while interactions (buttons pressed) are
 * Discord's own signed HTTP deliveries to the same route.
 */
export const discord: ChatPlatform<typeof discordSettings> = {
  name: "discord",
  // Discord's 2,000 characters, with room for the markup.
  messageLimit: 1900,
  channelType: defineChannelType({
    name: "discord",
    description:
      "A Discord application's bot: its interactions (signed with the application's public key) and the Gateway events a listener forwards (with the bot token) arrive at POST /channels/chat/{channel_id}; each direct message and each thread is a conversation.",
    settings: discordSettings,
    secrets: ["bot_token"],
  }),
  adapter: (settings, logger) =>
    new ChannelDiscordAdapter({
      botToken: settings.bot_token,
      publicKey: settings.public_key,
      applicationId: settings.application_id,
      apiUrl: settings.api_url ?? "https://discord.com/api/v10",
      // Each left unset falls back to a process-wide DISCORD_* variable.
      mentionRoleIds: [],
      respondToChannelIds: [],
      respondToGlobalMentions: false,
      contentFormat: DiscordContentFormat.Embeds,
      userName: "channelkit",
      logger,
    }) as unknown as Adapter,
};
