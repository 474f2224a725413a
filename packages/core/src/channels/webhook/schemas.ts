import { z } from "zod";
import { userText } from "../user-text.js";

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
