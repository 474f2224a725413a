import { z } from "zod";
import {
  conversationIdSchema,
  conversationModeSchema,
  integerParam,
  liveChatViewSchema,
  messageViewSchema,
  metadataSchema,
  userText,
} from "../../plugin/api.js";

/** The execute request body. Unknown fields are ignored. */
export const executeRequestSchema = z.object({
  payload: userText("payload"),
  metadata: metadataSchema,
  conversation_id: conversationIdSchema.optional(),
  stream: z.boolean({ error: "stream must be a boolean" }).optional(),
});

/** The history route's query string. */
export const historyQuerySchema = z.object({
  limit: integerParam("limit", 1, 200, 50, "The most recent messages to return, 1 to 200."),
  token_budget: integerParam("token_budget", 0, Number.MAX_SAFE_INTEGER, 0, "Keeps the most recent messages whose summed `token_count` fits; 0 for no budget."),
});

/** Outcome of a run, as the contract names it. */
export const runStatusSchema = z.enum(["success", "error", "pending", "cancelled"]);

/** The execute response document (`stream` false), as `runDocument` writes it. */
export const runDocumentSchema = z.object({
  run_id: z.uuid().meta({ description: "Stable run identifier." }),
  conversation_id: z.uuid().meta({ description: "Pass it back as `conversation_id` to resume the conversation." }),
  status: runStatusSchema,
  output: z.object({
    result: z.unknown().meta({ description: "Output of the flow, any JSON value or null; its shape depends on the flow." }),
    error: z.string().nullable().meta({ description: "The flow's error message when the run failed." }),
    messages: z
      .array(z.object({ role: z.literal("assistant"), content: z.string() }))
      .meta({ description: "Messages produced by this run only (its replies, or the question it asked); empty when none." }),
    metadata: z.object({
      channel_id: z.uuid(),
      flow_id: z.uuid(),
      flow_name: z.string(),
      flow_version: z.string().nullable(),
      environment: z.enum(["prod", "dev", "staging"]),
      execution_order: z.array(z.string()).meta({ description: "Node names in order of execution." }),
      started_at: z.iso.datetime(),
      completed_at: z.iso.datetime(),
      livechat_mode: conversationModeSchema.nullable().meta({
        description: "The live-chat mode when the run handed over or a human has the conversation (`livechat_waiting`, `livechat_active`), otherwise null.",
      }),
    }),
  }),
  usage: z.object({ total_nodes: z.int().min(0), duration_ms: z.int().min(0) }).nullable(),
  error: z
    .object({ code: z.literal("flow_error"), message: z.string() })
    .nullable()
    .meta({ description: "Set when `status` is `error`: the flow failed (a failure of the service itself is a 500 instead)." }),
});

/** The history response. */
export const historyResponseSchema = z.object({
  session_id: z.uuid().meta({ description: "The path parameter, echoed as written (an upper-case UUID stays upper-case)." }),
  messages: z.array(messageViewSchema).meta({ description: "Oldest first." }),
  total_messages: z.int().min(0).meta({ description: "Number of messages returned." }),
  total_tokens: z.int().min(0).meta({ description: "Estimated tokens of the messages returned." }),
  ...liveChatViewSchema.shape,
});

/**
 * The 404 of history and of the routes beside it (the live-chat subscription and cancel,
 * the resumable streams): the contract keeps the framework's format here, not the envelope.
 */
export const conversationDetailNotFoundSchema = z.strictObject({
  detail: z.string().meta({ description: "`No conversation found for session id <id>`." }),
});

/** What stopping a run answers once it is stored (200): the run and how it ended. */
export const runCancelledResponseSchema = z.object({ run_id: z.uuid(), conversation_id: z.uuid(), status: runStatusSchema });

/** What stopping a run answers when it is not stored within 10 s (202). */
export const runCancellingResponseSchema = z.object({ run_id: z.uuid(), conversation_id: z.uuid(), status: z.literal("cancelling") });
