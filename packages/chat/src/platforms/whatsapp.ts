import { defineChannelType } from "@channelkit/core";
import { createWhatsAppAdapter } from "@chat-adapter/whatsapp";
import type { Adapter } from "chat";
import { z } from "zod";
import type { ChatPlatform } from "./platform.js";

const whatsAppSettings = z.object({
  access_token: z.string().min(1).describe("The System User access token of the WhatsApp Cloud API."),
  app_secret: z.string().min(1).describe("The Meta app's secret: each delivery is signed with it (X-Hub-Signature-256)."),
  verify_token: z.string().min(1).describe("The token Meta sends back when it verifies the webhook (GET with hub.verify_token)."),
  phone_number_id: z.string().min(1).describe("The WhatsApp Business phone number's id (not the number itself)."),
  api_url: z.url().optional().describe("The Graph API's base URL (https://graph.facebook.com); a stand-in's in tests."),
  api_version: z
    .string()
    .regex(/^v\d+\.\d+$/, "api_version must look like v25.0")
    .optional()
    .describe("The Graph API version (v25.0 by default)."),
});

/** WhatsApp: one conversation per user of the business number, through `@chat-adapter/whatsapp` (Cloud API). */
export const whatsApp: ChatPlatform<typeof whatsAppSettings> = {
  name: "whatsapp",
  // WhatsApp's 4,096 characters.
  messageLimit: 4000,
  channelType: defineChannelType({
    name: "whatsapp",
    description:
      "A WhatsApp Business number (Cloud API): Meta delivers to POST /channels/chat/{channel_id} and verifies it with GET; each user is a conversation.",
    settings: whatsAppSettings,
    secrets: ["access_token", "app_secret", "verify_token"],
  }),
  adapter: (settings, logger) =>
    createWhatsAppAdapter({
      accessToken: settings.access_token,
      appSecret: settings.app_secret,
      verifyToken: settings.verify_token,
      phoneNumberId: settings.phone_number_id,
      apiUrl: settings.api_url ?? "https://graph.facebook.com",
      apiVersion: settings.api_version ?? "v25.0",
      userName: "channelkit",
      logger,
    }) as unknown as Adapter,
};
