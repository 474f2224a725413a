import { auditRoute } from "./audit-route.js";
import { deleteConversationRoute, eraseEndUserRoute, exportConversationsRoute, listConversationsRoute } from "./conversations-route.js";
import { getChannelRoute } from "./get-channel.js";
import { rotateKeyRoute } from "./rotate-key.js";
import { rotateSigningSecretRoute } from "./rotate-signing-secret.js";
import { updateChannelRoute } from "./update-channel.js";
import {
  type AdminAuthenticate,
  adminAuthenticator,
  type AdminAuthOptions,
  auditRouteQuerySchema,
  type ChannelPlugin,
  defineRoute,
  eraseEndUserBodySchema,
  exportConversationsQuerySchema,
  listConversationsQuerySchema,
  patchChannelBodySchema,
  routeDocs,
} from "../../plugin/api.js";

const CHANNEL = "/api/v1/channels/:channel_id" as const;
/** A browser console sends the admin token and the tenant: its preflight must allow both. */
const ADMIN_CORS = { headers: ["Authorization", "Content-Type", "X-Tenant-ID"] };

/**
 * The admin routes: rotate a channel's key or signing secret, read and change its settings,
 * read the audit trail, list and delete conversations, erase an end user, each behind an admin JWT for the tenant of `X-Tenant-ID`.
 *
 * @example
 * const service = await createChannelService({
 *   storage,
 *   flows,
 *   plugins: [adminApi({ secret: process.env.CHANNELKIT_ADMIN_JWT_SECRET })],
 * });
 * // POST /api/v1/channels/{id}/rotate-key with `Authorization: Bearer <JWT>` and `X-Tenant-ID`
 */
export function adminApi(options: AdminAuthOptions = {}): ChannelPlugin {
  let authenticate: AdminAuthenticate = () => {
    throw new Error("channelkit: adminApi() was not started: mount it with createChannelService({ plugins: [adminApi(...)] })");
  };
  return {
    id: "admin",
    init(ctx) {
      authenticate = adminAuthenticator(options, ctx.production, ctx.logger);
    },
    routes: [
      defineRoute({
        method: "GET",
        path: CHANNEL,
        auth: "admin",
        cors: ADMIN_CORS,
        doc: {
          operationId: "getChannel",
          summary: "Read a channel",
          description: "Archived channels included: reading is not managing. Another tenant's channel is not found.",
          tag: "admin",
          parameters: [routeDocs.CHANNEL_ID],
          responses: { 200: { description: "The channel.", json: "GetChannelResponse" } },
          errors: [...routeDocs.ADMIN, "channel_not_found"],
        },
        handle: ({ request, params }, ctx) => getChannelRoute(request, params.channel_id, ctx, authenticate),
      }),
      defineRoute({
        method: "PATCH",
        path: CHANNEL,
        auth: "admin",
        cors: ADMIN_CORS,
        body: patchChannelBodySchema,
        doc: {
          operationId: "updateChannel",
          summary: "Change a channel's settings",
          description: "Only the fields sent change; unknown fields are a 422. Recorded in the audit trail, refusals included.",
          tag: "admin",
          parameters: [routeDocs.CHANNEL_ID],
          body: { component: "UpdateChannelRequest", required: true },
          responses: {
            200: { description: "The channel as it is now, and its signing secret when signatures were just turned on.", json: "UpdateChannelResponse" },
          },
          errors: [...routeDocs.ADMIN, ...routeDocs.JSON_BODY, "channel_not_found", "channel_archived"],
        },
        handle: ({ request, params }, ctx) => updateChannelRoute(request, params.channel_id, ctx, authenticate),
      }),
      defineRoute({
        method: "POST",
        path: `${CHANNEL}/rotate-key` as const,
        auth: "admin",
        cors: ADMIN_CORS,
        doc: {
          operationId: "rotateChannelKey",
          summary: "Rotate a channel's key",
          description: "Revokes the key and creates one with the same prefix and environment. No body.",
          tag: "admin",
          parameters: [routeDocs.CHANNEL_ID],
          responses: { 200: { description: "The new key, shown once.", json: "RotateKeyResponse" } },
          errors: [...routeDocs.ADMIN, "channel_not_found", "channel_archived"],
        },
        handle: ({ request, params }, ctx) => rotateKeyRoute(request, params.channel_id, ctx, authenticate),
      }),
      defineRoute({
        method: "POST",
        path: `${CHANNEL}/rotate-signing-secret` as const,
        auth: "admin",
        cors: ADMIN_CORS,
        doc: {
          operationId: "rotateChannelSigningSecret",
          summary: "Rotate a channel's signing secret",
          description: "The previous secret is invalidated at once. No body.",
          tag: "admin",
          parameters: [routeDocs.CHANNEL_ID],
          responses: { 200: { description: "The new secret, shown once.", json: "RotateSigningSecretResponse" } },
          errors: [...routeDocs.ADMIN, "channel_not_found", "channel_archived"],
        },
        handle: ({ request, params }, ctx) => rotateSigningSecretRoute(request, params.channel_id, ctx, authenticate),
      }),
      defineRoute({
        method: "GET",
        path: "/api/v1/audit",
        auth: "admin",
        cors: ADMIN_CORS,
        query: auditRouteQuerySchema,
        doc: {
          operationId: "listAuditEvents",
          summary: "Read the audit trail",
          description: "The tenant's admin operations, newest first, refused ones included. Any other query parameter is a 422.",
          tag: "admin",
          responses: { 200: { description: "A page of the trail.", json: "AuditPage" } },
          errors: [...routeDocs.ADMIN, "validation_error"],
        },
        handle: (call, ctx) => auditRoute(call, ctx, authenticate),
      }),
      defineRoute({
        method: "GET",
        path: "/api/v1/conversations",
        auth: "admin",
        cors: ADMIN_CORS,
        query: listConversationsQuerySchema,
        doc: {
          operationId: "listConversations",
          summary: "List conversations",
          description:
            "The tenant's conversations, newest first (by creation time), a page at a time: of one channel, created in a period, or in which an end user took part. Any other query parameter is a 422.",
          tag: "admin",
          responses: { 200: { description: "A page of conversations.", json: "ConversationPage" } },
          errors: [...routeDocs.ADMIN, "validation_error"],
        },
        handle: (call, ctx) => listConversationsRoute(call, ctx, authenticate),
      }),
      defineRoute({
        method: "GET",
        path: "/api/v1/export/conversations",
        auth: "admin",
        cors: ADMIN_CORS,
        query: exportConversationsQuerySchema,
        doc: {
          operationId: "exportConversations",
          summary: "Export conversations as JSON Lines",
          description:
            "The tenant's conversations that match every filter given (of a channel, one conversation, created in `[since, until)`, or in which an end user took part), newest first, as `application/x-ndjson`: one `{ conversation, messages }` object per line, the conversation as the listing shows it and its messages oldest first as history shows them, read from the storage as the body is read. None matching is a 200 with an empty body; another tenant's `conversation_id` is `conversation_not_found`. Recorded in the audit trail (`export_conversations`, the filters, never a message). Any other query parameter is a 422.",
          tag: "admin",
          responses: {
            200: {
              description: "The conversations, one JSON object per line.",
              other: {
                mediaType: "application/x-ndjson",
                description: "One `{ conversation: Conversation, messages: Message[] }` object per line, each line ended by `\\n`.",
              },
            },
          },
          errors: [...routeDocs.ADMIN, "validation_error", "conversation_not_found"],
        },
        handle: (call, ctx) => exportConversationsRoute(call, ctx, authenticate),
      }),
      defineRoute({
        method: "DELETE",
        path: "/api/v1/conversations/:conversation_id",
        auth: "admin",
        cors: ADMIN_CORS,
        doc: {
          operationId: "deleteConversation",
          summary: "Delete a conversation",
          description:
            "Deletes the conversation and every row of it (messages, runs, recorded streams, idempotency records, live-chat state) in one transaction. Refused with 409 `run_in_progress` while a run of it is in flight. Recorded in the audit trail (never a message), refusals included. Another tenant's conversation is not found.",
          tag: "admin",
          parameters: [routeDocs.CONVERSATION_ID],
          responses: { 200: { description: "What was deleted.", json: "DeleteConversationResponse" } },
          errors: [...routeDocs.ADMIN, "validation_error", "conversation_not_found", "run_in_progress"],
        },
        handle: ({ request, params }, ctx) => deleteConversationRoute(request, params.conversation_id, ctx, authenticate),
      }),
      defineRoute({
        method: "POST",
        path: "/api/v1/end-users/erase",
        auth: "admin",
        cors: ADMIN_CORS,
        body: eraseEndUserBodySchema,
        doc: {
          operationId: "eraseEndUser",
          summary: "Erase an end user",
          description:
            "Deletes every conversation of the tenant in which a message's metadata names the end user (`platform_user_id`, as chat platforms store it, or `external_user_id`), as the delete route does. Recorded in the audit trail with the SHA-256 of the user's id, never the id itself nor a message.",
          tag: "admin",
          body: { component: "EraseEndUserRequest", required: true },
          responses: { 200: { description: "What was deleted.", json: "EraseEndUserResponse" } },
          errors: [...routeDocs.ADMIN, ...routeDocs.JSON_BODY, "run_in_progress"],
        },
        handle: ({ request }, ctx) => eraseEndUserRoute(request, ctx, authenticate),
      }),
    ],
  };
}
