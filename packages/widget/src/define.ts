import { ChannelkitChat } from "./element.js";

/**
 * Defines the chat element under `tagName` (once: a name already defined is left as it is)
 * and returns its class. Another name than `channelkit-chat` gets its own subclass, since a
 * class can be defined under one name only.
 */
export function defineChannelkitChat(tagName = "channelkit-chat"): CustomElementConstructor {
  const existing = customElements.get(tagName);
  if (existing) return existing;
  const element = tagName === "channelkit-chat" ? ChannelkitChat : class extends ChannelkitChat {};
  customElements.define(tagName, element);
  return element;
}
