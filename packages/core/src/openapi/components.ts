import { z } from "zod";
import {
  auditPageSchema,
  getChannelResponseSchema,
  patchChannelBodySchema,
  rotateKeyResponseSchema,
  rotateSigningSecretResponseSchema,
  updateChannelResponseSchema,
} from "../admin/schemas.js";
import { conversationPageSchema, deleteConversationResponseSchema, eraseEndUserBodySchema, eraseEndUserResponseSchema } from "../admin/conversations.js";
import {
  conversationDetailNotFoundSchema,
  executeRequestSchema,
  historyResponseSchema,
  runCancelledResponseSchema,
  runCancellingResponseSchema,
  runDocumentSchema,
} from "../channels/api/schemas.js";
import {
  newMessageResponseSchema,
  newMessageSchema,
  startConversationResponseSchema,
  startConversationSchema,
  webhookEventSchema,
} from "../channels/webhook/schemas.js";
import { aiChatRequestSchema, widgetChatRequestSchema, widgetConfigResponseSchema } from "../channels/widget/schemas.js";
import { messageViewSchema } from "../conversations/message-view.js";
import { bridgeEventResponseSchema, bridgeEventSchema } from "../livechat/bridge/schemas.js";
import {
  acceptBodySchema,
  inboxConversationOnlyResponseSchema,
  inboxConversationResponseSchema,
  inboxConversationViewSchema,
  inboxFeedEventSchema,
  inboxListResponseSchema,
} from "../livechat/inbox/schemas.js";
import { agentMessageResponseSchema, agentMessageSchema, conversationEventSchema, liveChatStateResponseSchema } from "../livechat/schemas.js";
import { uiMessageStreamPartSchema } from "../runs/schemas.js";
import { errorEnvelopeSchema } from "./errors.js";

/** A JSON Schema, as the document holds it. */
export type JsonSchema = { [keyword: string]: unknown };

/**
 * One server-sent event whose `data:` line is the JSON of `data` (an event without an `id:`
 * line has no `id`). An event stream is described by the schema of one of its events, and
 * a client parses each `data:` line as JSON; comment lines (`: keep-alive`) are not events.
 */
function sseEvent<Data extends z.ZodType>(data: Data, description: string, id?: string) {
  return z
    .strictObject({
      ...(id === undefined ? {} : { id: z.string().optional().meta({ description: id }) }),
      data,
    })
    .meta({ description });
}

/** The request bodies, by component name: described as the server reads them (`io: "input"`). */
const REQUESTS = {
  ExecuteRequest: executeRequestSchema.meta({ description: "The execute body. Unknown fields are ignored." }),
  WidgetChatRequest: z.union([aiChatRequestSchema, widgetChatRequestSchema]).meta({
    description:
      "Either the AI SDK chat request `useChat`'s `DefaultChatTransport` sends (`{ id, messages, trigger }`: the payload is the text of the last user message, the chat id binds a conversation of the channel), or `{ payload, conversation_id?, metadata? }` as on execute.",
  }),
  StartConversationRequest: startConversationSchema,
  NewMessageRequest: newMessageSchema,
  UpdateChannelRequest: patchChannelBodySchema.meta({ description: "Every field optional; any other field is a 422 naming it." }),
  AgentMessageRequest: agentMessageSchema,
  AcceptRequest: acceptBodySchema,
  EraseEndUserRequest: eraseEndUserBodySchema,
  BridgeEvent: bridgeEventSchema,
} satisfies Record<string, z.ZodType>;

/** The responses and what they are made of, by component name: described as the server writes them. */
const RESPONSES = {
  ErrorEnvelope: errorEnvelopeSchema,
  ConversationDetailNotFound: conversationDetailNotFoundSchema,
  RunDocument: runDocumentSchema,
  UIMessageStreamPart: uiMessageStreamPartSchema,
  UIMessageStreamEvent: sseEvent(
    uiMessageStreamPartSchema,
    "One event of the AI SDK UI message stream (header `x-vercel-ai-ui-message-stream: v1`): a `data: <json>` line and a blank line, no `[DONE]`. Order: `data-run`, then per message `text-start`, `text-delta`..., `text-end`, then `finish`, or `error` and nothing after it.",
  ),
  MessageView: messageViewSchema,
  HistoryResponse: historyResponseSchema,
  LiveChatState: liveChatStateResponseSchema,
  ConversationEvent: conversationEventSchema,
  ConversationEventStreamEvent: sseEvent(
    conversationEventSchema,
    "One event of a conversation's live chat: `mode` first (the mode now), then each live-chat message (its `id:` line is its turn index, what `Last-Event-ID` and `?after=` take) and each change of mode.",
    "The message's `turn_index`, on `message` events.",
  ),
  RunCancelled: runCancelledResponseSchema,
  RunCancelling: runCancellingResponseSchema,
  WidgetConfig: widgetConfigResponseSchema,
  WebhookEvent: webhookEventSchema,
  StartConversationResponse: startConversationResponseSchema,
  NewMessageResponse: newMessageResponseSchema,
  GetChannelResponse: getChannelResponseSchema,
  UpdateChannelResponse: updateChannelResponseSchema,
  RotateKeyResponse: rotateKeyResponseSchema,
  RotateSigningSecretResponse: rotateSigningSecretResponseSchema,
  AuditPage: auditPageSchema,
  ConversationPage: conversationPageSchema,
  DeleteConversationResponse: deleteConversationResponseSchema,
  EraseEndUserResponse: eraseEndUserResponseSchema,
  InboxConversation: inboxConversationViewSchema,
  InboxList: inboxListResponseSchema,
  InboxConversationResponse: inboxConversationResponseSchema,
  InboxConversationOnly: inboxConversationOnlyResponseSchema,
  InboxFeedEvent: inboxFeedEventSchema,
  InboxFeedStreamEvent: sseEvent(inboxFeedEventSchema, "One event of the agents' feed: `ready` once listening, then handovers, messages and changes of mode."),
  AgentMessageResponse: agentMessageResponseSchema,
  BridgeEventResponse: bridgeEventResponseSchema,
} satisfies Record<string, z.ZodType>;

/** The name of a request body component. */
export type RequestComponent = keyof typeof REQUESTS;
/** The name of a response component. */
export type ResponseComponent = keyof typeof RESPONSES;

/** `#/components/schemas/<name>`. */
export function ref(name: RequestComponent | ResponseComponent): { $ref: string } {
  return { $ref: `#/components/schemas/${name}` };
}

/** A schema of its own, written inline (a parameter, a header). */
export function inlineSchema(schema: z.ZodType, io: "input" | "output" = "input"): JsonSchema {
  return tidy(z.toJSONSchema(schema, { io, target: "draft-2020-12", unrepresentable: "any" }) as JsonSchema);
}

/**
 * Every component schema, from the zod schemas the server validates and writes with: each
 * registered schema met inside another becomes a `$ref` to its component.
 */
export function componentSchemas(): Record<string, JsonSchema> {
  return { ...convert(REQUESTS, "input"), ...convert(RESPONSES, "output") };
}

function convert(schemas: Record<string, z.ZodType>, io: "input" | "output"): Record<string, JsonSchema> {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(schemas)) registry.add(schema, { id });
  const { schemas: converted } = z.toJSONSchema(registry, {
    io,
    target: "draft-2020-12",
    unrepresentable: "any",
    uri: (id) => `#/components/schemas/${id}`,
  }) as { schemas: Record<string, JsonSchema> };
  if ("__shared" in converted) throw new Error("channelkit: a schema of the OpenAPI document needs shared definitions: register it as a component");
  return Object.fromEntries(Object.entries(converted).map(([id, schema]) => [id, tidy(schema)]));
}

/** The largest and smallest safe integers zod writes as every integer's bounds: noise in a document. */
const SAFE_BOUNDS = new Set([Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER]);

/**
 * A converted schema as the document holds it: without `$schema` and `$id` (a component is
 * part of the document, whose dialect is 2020-12), nor an integer's default safe bounds.
 */
function tidy(schema: JsonSchema): JsonSchema {
  const { $schema: _dialect, $id: _id, ...rest } = schema;
  return strip(rest) as JsonSchema;
}

function strip(value: unknown, key?: string): unknown {
  if (Array.isArray(value)) return value.map((item) => strip(item));
  if (typeof value !== "object" || value === null) return value;
  // Inside `properties` the keys are field names, which may be anything.
  const names = key === "properties";
  const entries = Object.entries(value as Record<string, unknown>).filter(
    ([name, item]) => names || !((name === "minimum" || name === "maximum") && typeof item === "number" && SAFE_BOUNDS.has(item)),
  );
  const stripped = Object.fromEntries(entries.map(([name, item]) => [name, strip(item, names ? undefined : name)]));
  const tag = names ? null : discriminatorOf(stripped.oneOf);
  return tag === null ? stripped : { type: "object", ...stripped, discriminator: { propertyName: tag } };
}

/**
 * The property that tells apart the branches of a zod discriminated union (a `oneOf` of
 * objects each requiring a different constant of it), written as OpenAPI's `discriminator`:
 * code generators make a tagged union of it, and a validator names the branch that failed.
 */
function discriminatorOf(oneOf: unknown): string | null {
  if (!Array.isArray(oneOf) || oneOf.length < 2) return null;
  const branches = oneOf as JsonSchema[];
  const candidates = Object.keys((branches[0]?.properties ?? {}) as JsonSchema);
  const tag = candidates.find((name) =>
    branches.every((branch) => {
      const property = (branch.properties as Record<string, JsonSchema> | undefined)?.[name];
      return property !== undefined && "const" in property && Array.isArray(branch.required) && branch.required.includes(name);
    }),
  );
  return tag ?? null;
}
