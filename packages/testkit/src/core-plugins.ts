import { adminApi, apiChannel, type ChannelPlugin, liveChatInbox, liveChatWebhookBridge, openApiPlugin, webhookChannel, widgetChannel } from "@channelkit/core";

/**
 * Every plugin of `@channelkit/core` whose routes it documents: the API, webhook and widget
 * channels, the document's own route, `adminApi()`, `liveChatInbox()` and
 * `liveChatWebhookBridge()`, only described (their options are never used).
 */
export function corePlugins(): ChannelPlugin[] {
  return [
    apiChannel(),
    webhookChannel(),
    widgetChannel(),
    openApiPlugin(() => {
      throw new Error("only described, never served");
    }),
    adminApi(),
    liveChatInbox(),
    liveChatWebhookBridge({ url: "https://bridge.invalid/", secret: "only-described-never-used" }),
  ];
}
