import { z } from "zod";
import { userText } from "../../plugin/api.js";

/** Body of `startConversation`. Unknown fields are ignored, as on execute. */
export const startConversationSchema = z.object(
  {
    language: z
      .string({ error: "language is required: one of the channel's languages, e.g. en_US" })
      .regex(/^[a-z]{2}_[A-Z]{2}$/, "language must be a code of the form xx_XX, e.g. en_US"),
    integrationContext: z.record(z.string(), z.unknown(), { error: "integrationContext must be an object" }).optional(),
  },
  { error: (issue) => (issue.code === "invalid_type" ? "the body must be a JSON object" : undefined) },
);

/** Body of `newMessage`. Unknown fields are ignored, as on execute. */
export const newMessageSchema = z.object(
  {
    conversationId: z.string({ error: "conversationId is required: the id startConversation answered" }).min(1, "conversationId must not be empty"),
    userInput: userText("userInput"),
  },
  { error: (issue) => (issue.code === "invalid_type" ? "the body must be a JSON object" : undefined) },
);

/** `BOT_MESSAGE.data`: a reply of the flow. */
export const botMessageDataSchema = z.object({
  content: z.string().meta({ description: "The text as HTML, escaped so that it shows as written." }),
  rawContent: z.string().meta({ description: "The text as the flow wrote it." }),
  suggestions: z.array(z.string()),
  expectedResponseType: z.string().meta({ description: "`textOrSuggestion` with suggestions, else `text`, unless the flow says otherwise." }),
  sources: z.array(z.unknown()),
});

/** An event of a webhook conversation (`eventStack`, `newEvents`). */
export const webhookEventSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("START"), data: z.strictObject({}), timestamp: z.iso.datetime() }),
  z.object({ type: z.literal("BOT_MESSAGE"), data: botMessageDataSchema, timestamp: z.iso.datetime() }),
]);

/** The conversation record `startConversation` answers (`conversationRecord`); docs/webhook.md fixes the values the contract leaves open. */
export const webhookConversationSchema = z.object({
  id: z.uuid().meta({ description: "Keep it: `newMessage` takes it as `conversationId`." }),
  eventStack: z.array(webhookEventSchema).meta({ description: "`START`, then the bot's first messages." }),
  context: z.object({
    variables: z.record(z.string(), z.unknown()),
    uploadedFiles: z.record(z.string(), z.unknown()),
    channel: z.object({
      id: z.uuid(),
      version: z.string().nullable(),
      release: z.enum(["prod", "dev", "staging"]),
      languages: z.array(z.string()),
      channelType: z.literal("webhook"),
    }),
    language: z.string(),
    shouldClassifyNextMessage: z.boolean(),
    digressionTypeNextMessage: z.string(),
    graphReaderConversationalStack: z.array(
      z.object({
        status: z.object({ executorType: z.string(), statusType: z.string(), nodeId: z.string().optional(), flagName: z.string().optional() }),
        context: z.object({ scenarioName: z.string().optional() }),
      }),
    ),
    nextMessageExpectedType: z.string(),
    entities: z.array(z.unknown()),
  }),
  status: z.enum(["ACTIVE", "HANDOVER"]),
  labelIds: z.array(z.string()),
  createdAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
});

/** What `startConversation` answers. */
export const startConversationResponseSchema = z.object({
  conversation: z.object({
    conversation: webhookConversationSchema,
    newMessages: z.object({ newEvents: z.array(webhookEventSchema).meta({ description: "The events this call produced: the bot's greeting." }) }),
  }),
});

/** What `newMessage` answers: the events the message produced. */
export const newMessageResponseSchema = z.object({ conversation: z.object({ newEvents: z.array(webhookEventSchema) }) });
