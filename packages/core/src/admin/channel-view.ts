import { channelRateLimitsView } from "../ratelimit/rules.js";
import { isBuiltInChannelType } from "../channels/settings.js";
import type { ChannelRecord } from "../storage/types.js";

/**
 * A channel as the contract shows it: never the key, never the signing secret, never a secret
 * setting. A channel of a plugin's type also shows its `settings` (those that are not secrets)
 * and `secrets`: the names of its secret settings that are set, as `secretNames` says (null
 * when the master key cannot open them, or when the caller did not open them).
 */
export function channelView(channel: ChannelRecord, secretNames: readonly string[] | null = null) {
  return {
    id: channel.id,
    tenant_id: channel.tenantId,
    name: channel.name,
    type: channel.type,
    mode: channel.mode,
    environment: channel.environment,
    state: channel.state,
    flow: channel.flowName,
    api_key_hint: channel.apiKeyHint,
    has_signing_secret: channel.signingSecretEncrypted !== null,
    config: { require_signature: channel.requireSignature },
    allowed_origins: channel.allowedOrigins,
    default_stream: channel.defaultStream,
    /** What the channel's chat widget overrides of its defaults. */
    widget: channel.widget,
    /** Live chat: the status message per conversation mode, and how long a handover waits for an agent (null: 600 s). */
    livechat: { status_messages: channel.livechatMessages, wait_timeout_seconds: channel.livechatWaitTimeoutSeconds },
    /** How long a run may last before it is stopped as an error (null: 300 s). */
    run_timeout_seconds: channel.runTimeoutSeconds,
    /** Days after which an ended conversation is deleted by the retention sweep (null: kept for ever). */
    retention_days: channel.retentionDays ?? null,
    /** Whether a streamed run goes on when its client goes away and can be resumed (docs/streaming.md). */
    resumable_streams: channel.resumableStreams,
    /** The channel's own rate limits, in the wire's names; a name left out takes the service's (see docs/security.md). */
    rate_limits: channelRateLimitsView(channel.rateLimits ?? {}),
    ...(channel.type === "webhook" ? { client_id: channel.clientId, languages: channel.languages } : {}),
    ...(isBuiltInChannelType(channel.type) ? {} : { settings: channel.settings, secrets: secretNames === null ? null : [...secretNames] }),
    created_at: channel.createdAt,
    updated_at: channel.updatedAt,
  };
}

/** The JSON shape of {@link channelView}. */
export type ChannelView = ReturnType<typeof channelView>;
