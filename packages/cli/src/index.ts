/**
 * `@channelkit/cli`: the `channelkit` command (`npx channelkit --help`), its programmatic
 * `main`, and `defineConfig` for the config file it reads (`channelkit.config.ts`).
 */
export { main } from "./main.js";
export type { Io } from "./host.js";
export { defineConfig, type ChannelkitConfig, type ChannelkitConfigExport } from "./config.js";
