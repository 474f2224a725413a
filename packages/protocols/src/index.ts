/** Agent protocols as channels: MCP, A2A and AG-UI. */
export { AGUI_CHANNEL_TYPE, AGUI_PATH, aguiChannels, aguiChannelType } from "./agui/index.js";
