import type { defineChannelType, Logger } from "@channelkit/core";
import type { Adapter, Logger as ChatLogger } from "chat";
import type { z } from "zod";

/**
 * A chat platform: the channel type its channels have, and how to make the Chat SDK's
 * adapter of one channel from that channel's settings. Every option is passed explicitly:
 * an adapter's options fall back to process-wide environment variables
 * (`TELEGRAM_BOT_TOKEN`, ...), which would mix up the tenants of one service.
 */
export interface ChatPlatform<Settings extends z.ZodObject = z.ZodObject> {
  /** The adapter's name in the Chat SDK (`telegram`), which is also the channel type's. */
  name: string;
  /** The longest message posted, in characters: a longer reply is posted as several messages, none cut. */
  messageLimit: number;
  channelType: ReturnType<typeof defineChannelType<Settings>>;
  adapter(settings: z.infer<Settings>, logger: ChatLogger): Adapter;
}

/** The Chat SDK's logger on the service's: its warnings and errors, nothing below. */
export function chatLogger(logger: Logger, prefix = "channelkit chat"): ChatLogger {
  return {
    child: (name) => chatLogger(logger, `${prefix} ${name}`),
    debug: () => undefined,
    info: () => undefined,
    warn: (message, ...details) => logger.warn(`${prefix}: ${message}`, ...details),
    error: (message, ...details) => logger.error(`${prefix}: ${message}`, ...details),
  };
}
