import { discord } from "./discord.js";
import { googleChat } from "./gchat.js";
import type { ChatPlatform } from "./platform.js";
import { slack } from "./slack.js";
import { teams } from "./teams.js";
import { telegram } from "./telegram.js";
import { whatsApp } from "./whatsapp.js";

export { discord } from "./discord.js";
export { googleChat } from "./gchat.js";
export { type ChatPlatform, chatLogger } from "./platform.js";
export { slack } from "./slack.js";
export { teams } from "./teams.js";
export { telegram } from "./telegram.js";
export { whatsApp } from "./whatsapp.js";

/** The platforms `chatChannels()` serves by default. */
export const PLATFORMS: readonly ChatPlatform[] = [
  slack as unknown as ChatPlatform,
  teams as unknown as ChatPlatform,
  telegram as unknown as ChatPlatform,
  whatsApp as unknown as ChatPlatform,
  discord as unknown as ChatPlatform,
  googleChat as unknown as ChatPlatform,
];
