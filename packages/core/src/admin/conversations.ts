import { z } from "zod";
import { fromBase64Url, toBase64Url, utf8 } from "../auth/encoding.js";
import { conversationIdSchema } from "../conversations/schemas.js";
import type { MessageView } from "../conversations/message-view.js";
import { ServiceError } from "../http/errors.js";
import { integerParam } from "../http/validate.js";
import { conversationModeSchema } from "../livechat/schemas.js";
import type { ChannelRecord, ConversationMode, ConversationRecord } from "../storage/types.js";

/** Longest external user id taken: a chat platform's ids are far shorter. */
const MAX_EXTERNAL_USER_ID = 1000;

/** An ISO 8601 time with its offset (`Z` or `+02:00`), read as the instant it names (stored times are UTC, to the millisecond). */
const instant = (name: string) =>
  z.iso.datetime({ offset: true, error: `${name} must be an ISO 8601 time such as 2025-01-31T00:00:00Z` }).transform((value) => new Date(value).toISOString());

const externalUserId = (name: string) =>
  z
    .string(`${name} must be a string`)
    .min(1, `${name} must not be empty`)
    .max(MAX_EXTERNAL_USER_ID, `${name} must be at most ${MAX_EXTERNAL_USER_ID} characters`);

/** Input of `admin.deleteConversation`. */
export const deleteConversationSchema = z.strictObject({ conversationId: conversationIdSchema });

/** Input of `admin.eraseEndUser`. */
export const eraseEndUserSchema = z.strictObject({
  /** Only this tenant's conversations; every tenant's when absent (the admin routes always pass theirs). */
  tenantId: z.string().min(1, "tenantId must not be empty").optional(),
  /** The end user's id as a channel stored it: a chat platform's user id (`platform_user_id`), or `external_user_id`. */
  externalUserId: externalUserId("externalUserId"),
});

/** Input of `admin.listConversations`. */
export const listConversationsSchema = z.strictObject({
  /** Every tenant's when absent (the admin routes always pass theirs). */
  tenantId: z.string().min(1, "tenantId must not be empty").optional(),
  channelId: z.guid({ error: "channelId must be a UUID" }).optional(),
  /** Conversations created at or after this time. */
  since: instant("since").optional(),
  /** Conversations created before this time. */
  until: instant("until").optional(),
  /** Only the conversations in which this end user took part (as {@link eraseEndUserSchema} finds them). */
  externalUserId: externalUserId("externalUserId").optional(),
  limit: z.number("limit must be a number").int("limit must be 1 to 200").min(1, "limit must be 1 to 200").max(200, "limit must be 1 to 200").default(50),
  /** `next_cursor` of the previous page. */
  cursor: z.string().min(1, "cursor must not be empty").optional(),
});

/** Input of `admin.exportConversations`: every filter given narrows the export; since must not be after until. */
export const exportConversationsSchema = z
  .strictObject({
    /** Every tenant's when absent (the admin routes always pass theirs). */
    tenantId: z.string().min(1, "tenantId must not be empty").optional(),
    channelId: z.guid({ error: "channelId must be a UUID" }).optional(),
    /** Only this conversation. */
    conversationId: z.guid({ error: "conversationId must be a UUID" }).optional(),
    /** Conversations created at or after this time. */
    since: instant("since").optional(),
    /** Conversations created before this time. */
    until: instant("until").optional(),
    /** Only the conversations in which this end user took part (as {@link eraseEndUserSchema} finds them). */
    externalUserId: externalUserId("externalUserId").optional(),
  })
  .refine((input) => input.since === undefined || input.until === undefined || input.since <= input.until, {
    message: "since must not be after until",
    path: ["since"],
  });

/** Raw input of {@link exportConversationsSchema}. */
export type ExportConversationsInput = z.input<typeof exportConversationsSchema>;

/** Raw input of {@link deleteConversationSchema}. */
export type DeleteConversationInput = z.input<typeof deleteConversationSchema>;
/** Raw input of {@link eraseEndUserSchema}. */
export type EraseEndUserInput = z.input<typeof eraseEndUserSchema>;
/** Raw input of {@link listConversationsSchema}. */
export type ListConversationsInput = z.input<typeof listConversationsSchema>;

/** Body of `POST /api/v1/end-users/erase`: any other field is a 422. */
export const eraseEndUserBodySchema = z.strictObject(
  {
    external_user_id: externalUserId("external_user_id").meta({
      description: "The end user's id as a channel stored it on their messages' metadata: `platform_user_id` (a chat platform's user) or `external_user_id`.",
    }),
  },
  { error: (issue) => (issue.code === "invalid_type" ? "the body must be a JSON object" : undefined) },
);

/** Query of `GET /api/v1/conversations`: any other parameter is a 422. */
export const listConversationsQuerySchema = z.strictObject({
  channel_id: z.guid({ error: "channel_id must be a UUID" }).optional().meta({ description: "Only this channel's conversations." }),
  since: z.string().optional().meta({ description: "Only conversations created at or after this ISO 8601 time.", format: "date-time" }),
  until: z.string().optional().meta({ description: "Only conversations created before this ISO 8601 time.", format: "date-time" }),
  external_user_id: z
    .string()
    .optional()
    .meta({ description: "Only the conversations in which this end user took part (see `POST /api/v1/end-users/erase`)." }),
  limit: integerParam("limit", 1, 200, 50, "Conversations per page, 1 to 200."),
  cursor: z.string().min(1, "cursor must not be empty").optional().meta({ description: "The `next_cursor` of the previous page." }),
});

/** Query of `GET /api/v1/export/conversations`: any other parameter is a 422. */
export const exportConversationsQuerySchema = z.strictObject({
  channel_id: z.guid({ error: "channel_id must be a UUID" }).optional().meta({ description: "Only this channel's conversations." }),
  conversation_id: z.guid({ error: "conversation_id must be a UUID" }).optional().meta({ description: "Only this conversation." }),
  since: z.string().optional().meta({ description: "Only conversations created at or after this ISO 8601 time.", format: "date-time" }),
  until: z.string().optional().meta({ description: "Only conversations created before this ISO 8601 time.", format: "date-time" }),
  external_user_id: z
    .string()
    .optional()
    .meta({ description: "Only the conversations in which this end user took part (see `POST /api/v1/end-users/erase`)." }),
});

/** A conversation as the admin lists it: the live-chat inbox's view, without the wait's expiry. */
export const adminConversationViewSchema = z.object({
  conversation_id: z.uuid(),
  channel_id: z.uuid(),
  mode: conversationModeSchema.meta({ description: "The mode now: `bot` for a conversation that never handed over." }),
  livechat_status_message: z.string().nullable().meta({ description: "The channel's configured text for this mode, or null." }),
  livechat_conversation_id: z.string().nullable().meta({ description: "The provider's id of the current or last live chat, or null." }),
  mode_since: z.iso.datetime().meta({ description: "When the conversation entered its mode." }),
  language: z.string().nullable().meta({ description: "The language it was started in (webhook channels), or null." }),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
});

/** A conversation as `admin.listConversations` and `GET /api/v1/conversations` show it. */
export type AdminConversationView = z.output<typeof adminConversationViewSchema>;

/** `GET /api/v1/conversations`: a page, newest first. */
export const conversationPageSchema = z.object({
  conversations: z.array(adminConversationViewSchema),
  next_cursor: z.string().nullable().meta({ description: "Pass it back as `cursor` for the next page; null on the last." }),
});

/** A page of conversations, newest first; pass `next_cursor` back as `cursor` for the next page. */
export type ConversationPage = z.output<typeof conversationPageSchema>;

/** One line of `GET /api/v1/export/conversations`: a conversation as the listing shows it, with its messages as history shows them, oldest first. */
export interface ConversationExport {
  conversation: AdminConversationView;
  messages: MessageView[];
}

/** `DELETE /api/v1/conversations/{conversation_id}`: what was deleted. */
export const deleteConversationResponseSchema = z.object({
  deleted: z.object({
    conversation_id: z.uuid(),
    messages: z.int().meta({ description: "Its messages deleted, live-chat messages included." }),
    runs: z.int().meta({ description: "Its runs deleted, with their recorded streams." }),
  }),
});

/** What `admin.deleteConversation` and its route answer. */
export type DeletedConversationView = z.output<typeof deleteConversationResponseSchema>;

/** `POST /api/v1/end-users/erase`: what was deleted. */
export const eraseEndUserResponseSchema = z.object({
  erased: z.object({
    external_user_id: z.string(),
    conversations: z.int().meta({ description: "How many conversations were deleted." }),
    conversation_ids: z.array(z.uuid()).meta({ description: "Their ids." }),
    messages: z.int(),
    runs: z.int(),
  }),
});

/** What `admin.eraseEndUser` and its route answer. */
export type ErasedEndUserView = z.output<typeof eraseEndUserResponseSchema>;

/** A conversation in the wire's names, with its channel's status message for its mode. */
export function adminConversationView(conversation: ConversationRecord, channel: ChannelRecord | null): AdminConversationView {
  const messages: Partial<Record<ConversationMode, string>> = channel?.livechatMessages ?? {};
  return {
    conversation_id: conversation.id,
    channel_id: conversation.channelId,
    mode: conversation.mode,
    livechat_status_message: messages[conversation.mode] ?? null,
    livechat_conversation_id: conversation.livechatConversationId,
    mode_since: conversation.modeSince,
    language: conversation.language,
    created_at: conversation.createdAt,
    updated_at: conversation.updatedAt,
  };
}

/** The opaque cursor after `conversation`: its creation time and id, the order of the listing. */
export function conversationCursor(conversation: ConversationRecord): string {
  return toBase64Url(utf8(`${conversation.createdAt}|${conversation.id}`));
}

/** The position a cursor names; a cursor this service did not issue is a `validation_error`. */
export function parseConversationCursor(cursor: string): { createdAt: string; id: string } {
  let text = "";
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(fromBase64Url(cursor));
  } catch {
    // Falls through to the refusal below.
  }
  const [createdAt, id, extra] = text.split("|");
  if (!createdAt || !id || extra !== undefined || Number.isNaN(Date.parse(createdAt))) {
    throw new ServiceError("validation_error", "cursor is not a cursor this service issued (use next_cursor of the previous page)", {
      details: [{ path: "cursor", message: "unknown cursor" }],
    });
  }
  return { createdAt, id };
}
