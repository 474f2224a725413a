import { defineChannelType } from "@channelkit/core";
import { GoogleChatAdapter, type ServiceAccountCredentials } from "@chat-adapter/gchat";
import type { Adapter } from "chat";
import { z } from "zod";
import type { ChatPlatform } from "./platform.js";

/** The service account's key as Google gives it (a JSON file), or why it is not one. */
function serviceAccountKey(text: string): ServiceAccountCredentials | string {
  let key: unknown;
  try {
    key = JSON.parse(text);
  } catch {
    return "service_account must be the service account's JSON key (the file Google gives)";
  }
  const { client_email: email, private_key: privateKey, project_id: projectId } = (key ?? {}) as Record<string, unknown>;
  if (typeof email !== "string" || !email.includes("@")) return "service_account has no client_email";
  if (typeof privateKey !== "string" || !privateKey.includes("PRIVATE KEY")) return "service_account has no private_key";
  return { client_email: email, private_key: privateKey, ...(typeof projectId === "string" ? { project_id: projectId } : {}) };
}

const googleChatSettings = z.object({
  service_account: z
    .string()
    .superRefine((text, ctx) => {
      const key = serviceAccountKey(text);
      if (typeof key === "string") ctx.addIssue({ code: "custom", message: key });
    })
    .describe("The JSON key of the service account the app posts with (IAM & Admin, Service Accounts, Keys), as one string."),
  project_number: z
    .string()
    .regex(/^\d+$/, "project_number must be the Cloud project's number (digits), not its id")
    .describe(
      "The number of the Cloud project of the Chat app: the audience of Google's tokens (Authentication audience: Project number), and the add-on's identity.",
    ),
  endpoint_url: z
    .url({ protocol: /^https$/ })
    .optional()
    .describe(
      "The channel's URL as given to Google (https://…/channels/chat/{channel_id}): the audience of Google's tokens (Authentication audience: HTTP endpoint URL, always so for an add-on), and where buttons send their clicks.",
    ),
  user_name: z.string().min(1).optional().describe("The app's name, as users mention it in a space (@name): without it, only direct messages are answered."),
  api_url: z.url().optional().describe("The Chat API's root URL (https://chat.googleapis.com/)."),
});

/**
 * Google Chat: direct messages, and spaces where the app is mentioned, through
 * `@chat-adapter/gchat` as an HTTP endpoint app (Google Workspace add-on events), posting
 * with a service account's key. Google's bearer token on each delivery is always checked:
 * every option that would let the adapter accept an unverified request, or read a
 * process-wide `GOOGLE_CHAT_*` variable, is set here.
 */
export const googleChat: ChatPlatform<typeof googleChatSettings> = {
  name: "gchat",
  // Google Chat's 4,096 characters.
  messageLimit: 4000,
  channelType: defineChannelType({
    name: "gchat",
    description:
      "A Google Chat app (an HTTP endpoint, built as a Google Workspace add-on): Google delivers to POST /channels/chat/{channel_id} with a bearer token it signs; each direct message and each space's thread is a conversation.",
    settings: googleChatSettings,
    secrets: ["service_account"],
  }),
  adapter: (settings, logger) =>
    new GoogleChatAdapter({
      credentials: serviceAccountKey(settings.service_account) as ServiceAccountCredentials,
      googleChatProjectNumber: settings.project_number,
      // An add-on's tokens name its own service agent, which only this project's number gives.
      workspaceAddOnServiceAccountEmail: `service-${settings.project_number}@gcp-sa-gsuiteaddons.iam.gserviceaccount.com`,
      ...(settings.endpoint_url === undefined ? {} : { endpointUrl: settings.endpoint_url }),
      apiUrl: settings.api_url ?? "https://chat.googleapis.com/",
      // Never off: GOOGLE_CHAT_DISABLE_SIGNATURE_VERIFICATION=true would let a Pub/Sub-shaped request in unsigned.
      disableSignatureVerification: false,
      // Workspace Events (Pub/Sub) and domain-wide delegation are not served: "" keeps each
      // from being read from its GOOGLE_CHAT_* variable, and a Pub/Sub push is refused.
      pubsubTopic: "",
      pubsubAudience: "",
      pubsubServiceAccountEmail: "",
      impersonateUser: "",
      botUserId: "",
      userName: settings.user_name ?? "channelkit",
      logger,
    }) as unknown as Adapter,
};
