import { defineChannelType } from "@channelkit/core";
import { createTeamsAdapter } from "@chat-adapter/teams";
import type { Adapter } from "chat";
import { z } from "zod";
import type { ChatPlatform } from "./platform.js";
import { BOT_FRAMEWORK_OPENID_METADATA, botTokens, ENTRA_LOGIN_URL, verifyBotConnectorRequest } from "./teams-auth.js";

const teamsSettings = z.object({
  app_id: z.string().min(1).describe("The Azure Bot's Microsoft App ID (its Entra app registration's client id)."),
  app_password: z.string().min(1).describe("A client secret of that app registration: the bot buys its tokens with it."),
  tenant_id: z.string().min(1).optional().describe("The Entra tenant of a single-tenant bot (the Azure Bot's App tenant ID); absent for a multi-tenant bot."),
  openid_metadata_url: z
    .url()
    .optional()
    .describe(
      "Bot Framework's OpenID metadata, whose keys sign the Bot Connector's deliveries (https://login.botframework.com/v1/.well-known/openidconfiguration); a sovereign cloud's, or a stand-in's in tests.",
    ),
  login_url: z
    .url()
    .optional()
    .describe("Microsoft Entra ID's sign-in host (https://login.microsoftonline.com); a sovereign cloud's, or a stand-in's in tests."),
});

/**
 * Microsoft Teams: personal chats, group chats and channel threads (where the bot is
 * mentioned), through `@chat-adapter/teams`. Replies go to the Bot Connector at the
 * `serviceUrl` of the user's activity.
 *
 * Deliveries are checked by this platform, through the adapter's `webhookVerifier`: the
 * Teams SDK's own check reads its keys from a URL only the process-wide `CLOUD` variable
 * chooses. The check is always on: no setting turns it off. Tokens are bought through the
 * adapter's `token` factory, from the channel's own credentials.
 */
export const teams: ChatPlatform<typeof teamsSettings> = {
  name: "teams",
  // Teams' 28 KB per message, with room for the card.
  messageLimit: 10000,
  channelType: defineChannelType({
    name: "teams",
    description:
      "A Microsoft Teams bot (an Azure Bot's messaging endpoint): the Bot Connector delivers to POST /channels/chat/{channel_id}; each personal chat, group chat or channel thread is a conversation.",
    settings: teamsSettings,
    secrets: ["app_password"],
  }),
  adapter: (settings, logger) => {
    const metadataUrl = settings.openid_metadata_url ?? BOT_FRAMEWORK_OPENID_METADATA;
    return createTeamsAdapter({
      appId: settings.app_id,
      // A single-tenant bot names its tenant; "MultiTenant" keeps TEAMS_APP_TENANT_ID out.
      ...(settings.tenant_id === undefined ? { appType: "MultiTenant" as const } : { appType: "SingleTenant" as const, appTenantId: settings.tenant_id }),
      // Takes precedence over appPassword and over CLIENT_SECRET / TEAMS_APP_PASSWORD.
      token: botTokens({
        appId: settings.app_id,
        appPassword: settings.app_password,
        tenantId: settings.tenant_id,
        loginUrl: settings.login_url ?? ENTRA_LOGIN_URL,
      }),
      webhookVerifier: (request, body) =>
        verifyBotConnectorRequest(request, body, settings.app_id, metadataUrl).catch((error: unknown) => {
          // The adapter answers 401 and says nothing of why.
          logger.warn(`Bot Framework's keys could not be read from ${metadataUrl}: the delivery is refused`, error);
          return false;
        }),
      // Empty, not absent: TEAMS_API_URL would send every reply to one URL instead of the activity's serviceUrl.
      apiUrl: "",
      userName: "channelkit",
      logger,
    }) as unknown as Adapter;
  },
};
