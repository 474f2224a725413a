import { z } from "zod";
import { widgetFeaturesSchema, widgetStringsSchema, widgetThemeSchema } from "./settings.js";
import { conversationIdSchema, metadataSchema, userText } from "../../plugin/api.js";

/** Query of `GET /public/widget/config`. */
export const widgetConfigQuerySchema = z.object({
  locale: z
    .string()
    .regex(/^[a-z]{2}_[A-Z]{2}$/, "locale must be a code of the form xx_XX, e.g. en_US")
    .optional()
    .meta({ description: "A language of the channel, `xx_XX`." }),
});

const metadata = metadataSchema;

/** A part of a UI message, as the AI SDK sends it: only text parts matter here. */
const uiPart = z.looseObject({ type: z.string(), text: z.unknown().optional() });

/**
 * The AI SDK chat request `useChat`'s `DefaultChatTransport` sends: the chat's `id`, its
 * `messages` (UI messages with `parts`) and the `trigger`. Unknown fields are ignored.
 */
export const aiChatRequestSchema = z.object({
  id: z.string({ error: "id is the chat id, a string" }).min(1, "id must not be empty").max(200, "id must be at most 200 characters"),
  messages: z
    .array(z.looseObject({ role: z.string(), parts: z.array(uiPart, { error: "each message has parts" }) }), {
      error: "messages must be a list of UI messages",
    })
    .min(1, "messages must hold at least the user's message"),
  trigger: z.string().optional(),
  messageId: z.string().optional(),
  metadata,
});

/** The user's text of an AI SDK chat request: the text parts of its last user message. */
export const aiChatPayloadSchema = userText("the last user message's text");

/** The execute-like body: `{ payload, conversation_id?, metadata? }`. Unknown fields are ignored. */
export const widgetChatRequestSchema = z.object({
  payload: userText("payload"),
  conversation_id: conversationIdSchema.optional(),
  metadata,
});

/** What `GET /public/widget/config` answers: the defaults of the locale, overlaid with the channel's settings. */
export const widgetConfigResponseSchema = z.object({
  channel_id: z.uuid(),
  locale: z
    .string()
    .meta({ description: "The requested locale when the channel has it, else the best match of `Accept-Language`, else the channel's first language." }),
  languages: z.array(z.string()),
  strings: widgetStringsSchema,
  theme: widgetThemeSchema,
  features: widgetFeaturesSchema,
  default_stream: z.boolean(),
});
