/** A2A as a channel: `a2aChannels()` and its channel type. */
export { A2A_CARD_PATH, A2A_PATH, a2aChannels, a2aChannelType } from "./plugin.js";
export { A2A_PLUGIN_ID, SERVICE_ERROR_RPC_CODE as A2A_SERVICE_ERROR_RPC_CODE } from "./server.js";
export { A2A_CHANNEL_TYPE, type A2aSettings, a2aSettingsSchema } from "./settings.js";
