/** Agent protocols as channels: MCP, A2A and AG-UI. */
export {
  A2A_CARD_PATH,
  A2A_CHANNEL_TYPE,
  A2A_PATH,
  A2A_PLUGIN_ID,
  A2A_SERVICE_ERROR_RPC_CODE,
  type A2aSettings,
  a2aChannels,
  a2aChannelType,
  a2aSettingsSchema,
} from "./a2a/index.js";
export { AGUI_CHANNEL_TYPE, AGUI_PATH, aguiChannels, aguiChannelType } from "./agui/index.js";
export { MCP_CHANNEL_TYPE, MCP_PATH, MCP_SERVICE_ERROR_RPC_CODE, type McpSettings, mcpChannels, mcpChannelType, mcpSettingsSchema } from "./mcp/index.js";
