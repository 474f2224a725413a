/** AG-UI as a channel: `aguiChannels()` and its channel type. */
export { AGUI_PATH, aguiChannels, aguiChannelType } from "./plugin.js";
export { AGUI_CHANNEL_TYPE } from "./run.js";
