export { chatChannels, type ChatChannelsOptions, CHAT_WEBHOOK_PATH } from "./plugin.js";
export { type ChatPlatform, discord, googleChat, PLATFORMS, slack, teams, telegram, whatsApp } from "./platforms/index.js";
export { pluginStoreState } from "./state.js";
export { FAILED_REPLY } from "./answer.js";
