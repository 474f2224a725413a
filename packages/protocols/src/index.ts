/** Agent protocols as channels: MCP, A2A and AG-UI. */
export { AGUI_CHANNEL_TYPE, AGUI_PATH, aguiChannels, aguiChannelType } from "./agui/index.js";
export { MCP_CHANNEL_TYPE, MCP_PATH, type McpSettings, mcpChannels, mcpChannelType, mcpSettingsSchema, SERVICE_ERROR_RPC_CODE } from "./mcp/index.js";
