import { apiKeyHint, generateApiKey, prefixFor, randomBase62 } from "../auth/api-keys.js";
import { hashApiKey } from "../auth/api-keys.js";
import type { ServiceContext } from "../context.js";
import { ServiceError } from "../http/errors.js";
import { validate } from "../http/validate.js";
import type { ApiKeyRecord, ChannelPatch, ChannelRecord, TenantRecord } from "../storage/types.js";
import { type ChannelView, channelView } from "./channel-view.js";
import { type CreateChannelInput, type UpdateChannelInput, createChannelSchema, createTenantSchema, updateChannelSchema } from "./schemas.js";

/** A channel with its key in clear, shown once. */
export interface CreatedChannel {
  channel: ChannelView;
  api_key: string;
  signing_secret: string | null;
}

/**
 * Programmatic administration: what the `channelkit` command and the admin routes call.
 * Keys and signing secrets are returned in clear only by the call that creates them.
 */
export interface ChannelAdmin {
  createTenant(input: { name: string }): Promise<{ tenant: TenantRecord }>;
  createChannel(input: CreateChannelInput): Promise<CreatedChannel>;
  getChannel(channelId: string): Promise<{ channel: ChannelView }>;
  /** Applies a patch; `signing_secret` is set only when `requireSignature` went from false to true. */
  updateChannel(channelId: string, input: UpdateChannelInput): Promise<{ channel: ChannelView; signing_secret?: string }>;
  /** Revokes the active key and issues a new one with the same prefix and environment. */
  rotateKey(channelId: string): Promise<{ api_key: string; channel: { id: string; api_key_hint: string } }>;
  /** Replaces the signing secret; the previous one stops working at once. */
  rotateSigningSecret(channelId: string): Promise<{ signing_secret: string; channel: { id: string; has_signing_secret: true } }>;
  /** Tenants stored so far. */
  countTenants(): Promise<number>;
}

/** A new signing secret: 256 random bits in base62. */
function generateSigningSecret(): string {
  return `svc_sig_${randomBase62(43)}`;
}

/** Builds the {@link ChannelAdmin} of a service. */
export function createChannelAdmin(ctx: ServiceContext): ChannelAdmin {
  const { storage } = ctx;

  async function newKey(channel: ChannelRecord, now: string): Promise<{ key: string; record: ApiKeyRecord }> {
    const key = generateApiKey(prefixFor(channel.mode, channel.environment));
    const record: ApiKeyRecord = {
      id: crypto.randomUUID(),
      channelId: channel.id,
      tenantId: channel.tenantId,
      hash: await hashApiKey(key),
      prefix: prefixFor(channel.mode, channel.environment),
      environment: channel.environment,
      hint: apiKeyHint(key),
      createdAt: now,
      expiresAt: null,
      revokedAt: null,
    };
    return { key, record };
  }

  async function manageable(channelId: string): Promise<ChannelRecord> {
    const channel = await storage.findChannel(channelId);
    if (!channel) throw new ServiceError("channel_not_found");
    if (channel.state === "archived") throw new ServiceError("channel_archived");
    return channel;
  }

  function requireFlow(name: string): void {
    if (!ctx.flows.has(name)) {
      const known = [...ctx.flows.keys()].join(", ");
      throw new ServiceError("validation_error", `Unknown flow "${name}". Registered flows: ${known}.`);
    }
  }

  return {
    async createTenant(input) {
      const { name } = validate(createTenantSchema, input);
      const tenant: TenantRecord = { id: crypto.randomUUID(), name, createdAt: new Date().toISOString() };
      await storage.createTenant(tenant);
      return { tenant };
    },

    async createChannel(input) {
      const parsed = validate(createChannelSchema, input);
      requireFlow(parsed.flow);
      if (!(await storage.findTenant(parsed.tenantId))) {
        throw new ServiceError("validation_error", `No tenant exists with id ${parsed.tenantId}.`);
      }
      const now = new Date().toISOString();
      const signingSecret = parsed.requireSignature ? generateSigningSecret() : null;
      const channel: ChannelRecord = {
        id: crypto.randomUUID(),
        tenantId: parsed.tenantId,
        name: parsed.name ?? null,
        type: parsed.type,
        mode: parsed.mode,
        environment: parsed.environment,
        state: "active",
        flowName: parsed.flow,
        allowedOrigins: parsed.allowedOrigins,
        defaultStream: parsed.defaultStream,
        requireSignature: parsed.requireSignature,
        signingSecretEncrypted: signingSecret === null ? null : await ctx.secrets.encrypt(signingSecret),
        apiKeyHint: null,
        clientId: parsed.type === "webhook" ? randomBase62(24) : null,
        languages: parsed.languages,
        livechatMessages: parsed.livechatMessages,
        createdAt: now,
        updatedAt: now,
      };
      const { key, record } = await newKey(channel, now);
      channel.apiKeyHint = record.hint;
      await storage.createChannel(channel, record);
      return { channel: channelView(channel), api_key: key, signing_secret: signingSecret };
    },

    async getChannel(channelId) {
      const channel = await storage.findChannel(channelId);
      if (!channel) throw new ServiceError("channel_not_found");
      return { channel: channelView(channel) };
    },

    async updateChannel(channelId, input) {
      const parsed = validate(updateChannelSchema, input);
      const channel = await manageable(channelId);
      if (parsed.flow !== undefined) requireFlow(parsed.flow);
      const { flow, ...rest } = parsed;
      const patch: ChannelPatch = { ...rest, ...(flow === undefined ? {} : { flowName: flow }) };
      let signingSecret: string | undefined;
      if (parsed.requireSignature === true && !channel.requireSignature) {
        signingSecret = generateSigningSecret();
        patch.signingSecretEncrypted = await ctx.secrets.encrypt(signingSecret);
      }
      const updated = await storage.updateChannel(channelId, patch, new Date().toISOString());
      if (!updated) throw new ServiceError("channel_not_found");
      return signingSecret === undefined ? { channel: channelView(updated) } : { channel: channelView(updated), signing_secret: signingSecret };
    },

    async rotateKey(channelId) {
      const channel = await manageable(channelId);
      const now = new Date().toISOString();
      const { key, record } = await newKey(channel, now);
      await storage.replaceChannelKey(channel.id, record, now);
      return { api_key: key, channel: { id: channel.id, api_key_hint: record.hint } };
    },

    async rotateSigningSecret(channelId) {
      await manageable(channelId);
      const secret = generateSigningSecret();
      const sealed = await ctx.secrets.encrypt(secret);
      await storage.updateChannel(channelId, { signingSecretEncrypted: sealed }, new Date().toISOString());
      return { signing_secret: secret, channel: { id: channelId, has_signing_secret: true } };
    },

    countTenants: () => storage.countTenants(),
  };
}
