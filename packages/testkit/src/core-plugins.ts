import {
  adminApi,
  apiChannel,
  type ChannelPlugin,
  healthPlugin,
  liveChatInbox,
  liveChatWebhookBridge,
  memoryStorage,
  openApiPlugin,
  webhookChannel,
  widgetChannel,
} from "@channelkit/core";

/**
 * Every plugin of `@channelkit/core` whose routes it documents: the API, webhook and widget
 * channels, the document's own route, the health probes, `adminApi()`, `liveChatInbox()` and
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
    healthPlugin({ storage: memoryStorage(), plugins: () => [], closing: () => false }),
    adminApi(),
    liveChatInbox(),
    liveChatWebhookBridge({ url: "https://bridge.invalid/", secret: "only-described-never-used" }),
  ];
}
