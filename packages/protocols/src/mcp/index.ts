/** MCP as a channel: `mcpChannels()` and its channel type. */
export { MCP_PATH, mcpChannels, mcpChannelType } from "./plugin.js";
export { SERVICE_ERROR_RPC_CODE as MCP_SERVICE_ERROR_RPC_CODE } from "./server.js";
export { MCP_CHANNEL_TYPE, type McpSettings, mcpSettingsSchema } from "./settings.js";
