import { z } from "zod";
import { widgetSettingsSchema } from "../channels/widget/settings.js";
import { integerParam } from "../http/validate.js";
import { channelRateLimitsSchema, channelRateLimitsViewSchema, channelRateLimitsWireSchema } from "../ratelimit/rules.js";

const environment = z.enum(["prod", "dev", "staging"]);
const origin = z.string().refine((value) => {
  try {
    return new URL(value).origin === value;
  } catch {
    return false;
  }
}, "allowed origins must be exact origins such as https://app.example.com (scheme, host and port, no path)");
const MODES = ["bot", "livechat_waiting", "livechat_active", "livechat_closed", "livechat_expired", "livechat_cancelled", "livechat_unavailable"] as const;
/** A channel's live-chat status messages: a text per conversation mode, shown in history as `livechat_status_message`. */
const statusMessages = z.partialRecord(z.enum(MODES, `status messages are keyed by conversation mode: ${MODES.join(", ")}`), z.string().min(1).max(1000));
/** How long a handover waits for an agent, in seconds (1 second to 1 day); null for the default, 600. */
const waitTimeout = z
  .number("wait_timeout_seconds must be a number of seconds")
  .int("wait_timeout_seconds must be a whole number of seconds")
  .min(1, "wait_timeout_seconds must be 1 to 86400")
  .max(86_400, "wait_timeout_seconds must be 1 to 86400")
  .nullable();
/** A run's time limit, in seconds (1 second to 1 day); null for the default, 300. */
const runTimeout = z
  .number("run_timeout_seconds must be a number of seconds")
  .int("run_timeout_seconds must be a whole number of seconds")
  .min(1, "run_timeout_seconds must be 1 to 86400")
  .max(86_400, "run_timeout_seconds must be 1 to 86400")
  .nullable();
/** Days an ended conversation is kept before the retention sweep deletes it (1 day to 100 years); null keeps them for ever. */
const retention = z
  .number("retention_days must be a number of days")
  .int("retention_days must be a whole number of days")
  .min(1, "retention_days must be 1 to 36500")
  .max(36_500, "retention_days must be 1 to 36500")
  .nullable();
const language = z.string().regex(/^[a-z]{2}_[A-Z]{2}$/, "languages are codes of the form xx_XX, e.g. en_US");
/**
 * A plugin channel type's settings as sent: an object, each field checked by the type's own
 * schema once the type is known (`settings.<field>` in the details of a refusal).
 */
const settings = z.record(z.string(), z.unknown(), "settings must be an object of the channel type's settings");

/** Input of `admin.createTenant`. */
export const createTenantSchema = z.object({
  name: z.string().trim().min(1, "a tenant name is required").max(200),
});

/** Input of `admin.createChannel`. */
export const createChannelSchema = z.object({
  tenantId: z.string().min(1, "tenantId is required"),
  flow: z.string().min(1, "a flow name is required"),
  name: z.string().max(200).nullish(),
  /** `api`, `webhook`, or a channel type a plugin of the service registers (e.g. `telegram`). */
  type: z.string("type must be a channel type's name").min(1, "type must be a channel type's name").default("api"),
  /** A plugin type's settings, validated by its schema; the built-in types take none. */
  settings: settings.optional(),
  environment: environment.default("prod"),
  mode: z.enum(["server", "public"]).default("server"),
  allowedOrigins: z.array(origin).default([]),
  defaultStream: z.boolean().default(false),
  requireSignature: z.boolean().default(false),
  languages: z.array(language).min(1).default(["en_US"]),
  livechatMessages: statusMessages.default({}),
  livechatWaitTimeoutSeconds: waitTimeout.default(null),
  runTimeoutSeconds: runTimeout.default(null),
  /** Days an ended conversation is kept before the retention sweep deletes it; null: for ever (docs/operations.md). */
  retentionDays: retention.default(null),
  /** The channel's own rate limits, each replacing the service's (see docs/security.md). */
  rateLimits: channelRateLimitsSchema.nullable().default(null),
  /** Whether a streamed run goes on when its client goes away, and can be resumed from any instance (docs/streaming.md). */
  resumableStreams: z.boolean().default(false),
  widget: widgetSettingsSchema.default({}),
});

/** Input of `admin.updateChannel`. */
export const updateChannelSchema = z
  .object({
    name: z.string().max(200).nullable(),
    state: z.enum(["active", "inactive", "archived"]),
    environment,
    flow: z.string().min(1),
    allowedOrigins: z.array(origin),
    defaultStream: z.boolean(),
    requireSignature: z.boolean(),
    languages: z.array(language).min(1),
    /** The live-chat status messages, replacing the whole set. */
    livechatMessages: statusMessages,
    livechatWaitTimeoutSeconds: waitTimeout,
    runTimeoutSeconds: runTimeout,
    /** Days an ended conversation is kept before the retention sweep deletes it; null: for ever. */
    retentionDays: retention,
    /** The channel's own rate limits, replacing the whole set; null to take the service's. */
    rateLimits: channelRateLimitsSchema.nullable(),
    /** Whether streamed runs can be resumed (docs/streaming.md). */
    resumableStreams: z.boolean(),
    /** The widget settings, replacing the whole set (see `docs/widget.md`). */
    widget: widgetSettingsSchema,
    /**
     * A plugin type's settings, merged into the stored ones (a field sent as null is removed,
     * as in a JSON Merge Patch) and validated whole; a secret sent is sealed again.
     */
    settings,
  })
  .partial();

/** Raw input of {@link createChannelSchema}. */
export type CreateChannelInput = z.input<typeof createChannelSchema>;
/** Raw input of {@link updateChannelSchema}. */
export type UpdateChannelInput = z.input<typeof updateChannelSchema>;

/** Input of `admin.audit`. */
export const auditQuerySchema = z.strictObject({
  /** Every tenant's events when absent (the admin routes always pass theirs). */
  tenantId: z.string().min(1).optional(),
  channelId: z.string().min(1).optional(),
  limit: z.number().int().min(1, "limit must be 1 to 200").max(200, "limit must be 1 to 200").default(50),
  /** `next_cursor` of the previous page. */
  cursor: z.string().min(1).optional(),
});

/** Input of `admin.listChannels`. */
export const listChannelsSchema = z.strictObject({
  /** Every tenant's channels when absent. */
  tenantId: z.string().min(1, "tenantId must not be empty").optional(),
});

/** Raw input of {@link auditQuerySchema}. */
export type AuditQueryInput = z.input<typeof auditQuerySchema>;

/** `message` when the value is not an object; zod's own (naming the unknown keys) otherwise. */
function notAnObject(message: string) {
  return { error: (issue: { code?: string }) => (issue.code === "invalid_type" ? message : undefined) };
}

/**
 * Body of `PATCH /api/v1/channels/{channel_id}`, in the wire's names. Unknown fields are
 * refused rather than ignored: an admin wants a typo caught, not a setting silently kept.
 */
export const patchChannelBodySchema = z.strictObject(
  {
    name: z.string().max(200).nullable().optional(),
    state: z.enum(["active", "inactive", "archived"], "state must be active, inactive or archived").optional(),
    allowed_origins: z.array(origin).optional(),
    default_stream: z.boolean("default_stream must be a boolean").optional(),
    languages: z.array(language, "languages must be a list of codes such as en_US").min(1, "languages must name at least one language").optional(),
    widget: widgetSettingsSchema.optional(),
    run_timeout_seconds: runTimeout.optional(),
    /** Days an ended conversation is kept; null: for ever. */
    retention_days: retention.optional(),
    resumable_streams: z.boolean("resumable_streams must be a boolean").optional(),
    /** Replaces the whole set; null for the service's limits. */
    rate_limits: channelRateLimitsWireSchema.optional(),
    livechat: z
      .strictObject(
        {
          /** Replaces the whole set. */
          status_messages: statusMessages.optional(),
          wait_timeout_seconds: waitTimeout.optional(),
        },
        notAnObject("livechat must be an object"),
      )
      .optional(),
    config: z
      .strictObject({ require_signature: z.boolean("config.require_signature must be a boolean").optional() }, notAnObject("config must be an object"))
      .optional(),
    /** A plugin type's settings, merged into the stored ones (null removes a field) and validated whole. */
    settings: settings.optional(),
  },
  notAnObject("the body must be a JSON object"),
);

/** Query of `GET /api/v1/audit`: any other parameter is a 422. */
export const auditRouteQuerySchema = z.strictObject({
  channel_id: z.string().min(1, "channel_id must not be empty").optional().meta({ description: "Only this channel's events." }),
  limit: integerParam("limit", 1, 200, 50, "Events per page, 1 to 200."),
  cursor: z.string().min(1, "cursor must not be empty").optional().meta({ description: "The `next_cursor` of the previous page." }),
});

/** A channel as the admin routes show it (`channelView`): never the key, never the signing secret. */
export const channelViewSchema = z.object({
  id: z.uuid(),
  tenant_id: z.uuid(),
  name: z.string().nullable(),
  type: z.string().meta({ description: "`api`, `webhook`, or the name of a channel type a plugin registers (e.g. `telegram`)." }),
  mode: z.enum(["server", "public"]).meta({ description: "`server` takes `svc_live_`/`svc_test_` keys, `public` takes `svc_pub_` keys." }),
  environment,
  state: z.enum(["active", "inactive", "archived"]),
  flow: z.string().meta({ description: "The name of the flow the channel runs." }),
  api_key_hint: z.string().meta({ description: "The key's prefix, `****` and its last four characters." }),
  has_signing_secret: z.boolean(),
  config: z.object({ require_signature: z.boolean() }),
  allowed_origins: z.array(z.string()),
  default_stream: z.boolean(),
  widget: widgetSettingsSchema.meta({ description: "What the channel's chat widget overrides of its defaults." }),
  livechat: z.object({ status_messages: statusMessages, wait_timeout_seconds: z.int().nullable().meta({ description: "null: 600 s." }) }),
  run_timeout_seconds: z.int().nullable().meta({ description: "How long a run may last before it is stopped as an error; null: 300 s." }),
  retention_days: z.int().nullable().meta({
    description: "Days after which a conversation that ended (no activity, no live chat open) is deleted by the retention sweep; null: kept for ever.",
  }),
  resumable_streams: z.boolean(),
  rate_limits: channelRateLimitsViewSchema.meta({ description: "The channel's own rate limits; a name left out takes the service's." }),
  client_id: z.string().optional().meta({ description: "Webhook channels only: the `client_id` of their routes." }),
  languages: z.array(z.string()).optional().meta({ description: "Webhook channels only." }),
  settings: z.record(z.string(), z.unknown()).optional().meta({ description: "Channels of a plugin's type only: the type's settings that are not secrets." }),
  secrets: z.array(z.string()).nullable().optional().meta({
    description:
      "Channels of a plugin's type only: the names of its secret settings that are set (never their values); null when the configured master key cannot open them.",
  }),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
});

/** `GET /api/v1/channels/{channel_id}`. */
export const getChannelResponseSchema = z.object({ channel: channelViewSchema });

/** `PATCH /api/v1/channels/{channel_id}`: `signing_secret` only when `config.require_signature` went from false to true. */
export const updateChannelResponseSchema = z.object({
  channel: channelViewSchema,
  signing_secret: z.string().optional().meta({ description: "The signing secret in clear, shown this once." }),
});

/** `POST /api/v1/channels/{channel_id}/rotate-key`. */
export const rotateKeyResponseSchema = z.object({
  api_key: z.string().meta({ description: "The new key in clear, shown this once; the previous key is revoked." }),
  channel: z.object({ id: z.uuid(), api_key_hint: z.string() }),
});

/** `POST /api/v1/channels/{channel_id}/rotate-signing-secret`. */
export const rotateSigningSecretResponseSchema = z.object({
  signing_secret: z.string().meta({ description: "The new secret in clear, shown this once; the previous one no longer verifies." }),
  channel: z.object({ id: z.uuid(), has_signing_secret: z.literal(true) }),
});

/** One entry of the audit trail (`auditView`). */
/** The admin operations the audit trail records. */
export const auditOperationSchema = z.enum([
  "create_tenant",
  "create_channel",
  "update_channel",
  "rotate_key",
  "rotate_signing_secret",
  "delete_conversation",
  "erase_end_user",
  "export_conversations",
  "reseal_secrets",
  "retention_sweep",
]);

export const auditEventSchema = z.object({
  id: z.string(),
  timestamp: z.iso.datetime(),
  tenant_id: z.string().nullable().meta({ description: "The tenant the operation acted on, as it was named (`X-Tenant-ID` for a refused admin call)." }),
  channel_id: z.string().nullable().meta({ description: "The channel the operation named, as it was named (a refused one may name no channel that exists)." }),
  actor: z
    .string()
    .nullable()
    .meta({ description: "The admin token's `sub` (`development` in development mode), the name given to `admin.as()`, `cli`, or `service`." }),
  via: z.enum(["http", "service"]),
  operation: auditOperationSchema,
  changes: z
    .record(z.string(), z.object({ from: z.unknown(), to: z.unknown() }))
    .meta({ description: "What changed, by channel field: never a key or a secret." }),
  outcome: z.enum(["success", "failure"]),
  error_code: z.string().nullable().meta({ description: "The error code of a refused operation." }),
});

/** `GET /api/v1/audit`: a page of the audit trail, newest first. */
export const auditPageSchema = z.object({
  events: z.array(auditEventSchema),
  next_cursor: z.string().nullable().meta({ description: "Pass it back as `cursor` for the next page; null on the last." }),
});
