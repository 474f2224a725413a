/**
 * `@channelkit/widget`: the `<channelkit-chat>` element for pages built with a bundler.
 * Pages without one use the loader (`@channelkit/widget/widget.js`, served by
 * `widgetAsset()` from `@channelkit/widget/plugin`).
 */
export { ChannelkitChat } from "./element.js";
export { defineChannelkitChat } from "./define.js";
export type { WidgetConfig, WidgetErrorStrings, WidgetFeatures, WidgetStrings, WidgetTheme } from "./types.js";
