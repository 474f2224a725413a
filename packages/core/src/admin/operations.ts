import { channelEndpoint } from "../plugin/channel-type.js";
import { apiKeyHint, generateApiKey, hashApiKey, prefixFor, randomBase62 } from "../auth/api-keys.js";
import type { ServiceContext } from "../context.js";
import { isServiceError, ServiceError } from "../http/errors.js";
import { validate } from "../http/validate.js";
import { sha256Hex } from "../auth/encoding.js";
import { isoNow, isoTimestamp } from "../runs/timestamp.js";
import { messageView } from "../conversations/message-view.js";
import { canonicalId } from "../storage/records.js";
import type {
  ApiKeyRecord,
  AuditEventRecord,
  ChannelPatch,
  ChannelRecord,
  ConversationRecord,
  DeletedConversation,
  Storage,
  TenantRecord,
} from "../storage/types.js";
import { type AuditOperation, type AuditPage, auditCursor, auditEventId, auditView, channelChanges, countChanges, parseAuditCursor } from "./audit.js";
import { channelTypeFor, newSettings, type SettingsUpdate, updatedSettings, viewOf } from "./channel-settings.js";
import { type ChannelView, channelView } from "./channel-view.js";
import { type ResealedSecrets, resealChannel } from "./reseal.js";
import { type RetentionSweepResult, sweepRetention } from "../conversations/retention.js";
import {
  adminConversationView,
  type ConversationPage,
  conversationCursor,
  type DeleteConversationInput,
  type DeletedConversationView,
  deleteConversationSchema,
  type ConversationExport,
  type ErasedEndUserView,
  type EraseEndUserInput,
  eraseEndUserSchema,
  type ExportConversationsInput,
  exportConversationsSchema,
  type ListConversationsInput,
  listConversationsSchema,
  parseConversationCursor,
} from "./conversations.js";
import {
  type AuditQueryInput,
  auditQuerySchema,
  type CreateChannelInput,
  createChannelSchema,
  createTenantSchema,
  listChannelsSchema,
  type UpdateChannelInput,
  updateChannelSchema,
} from "./schemas.js";

/** A tenant as the admin shows it, in the wire's names. */

/**
 * How often turning signatures on, or merging a plugin type's settings, reads the channel again
 * when another update changed its signature settings (or its settings) meanwhile.
 */
const SIGNATURE_RACE_ATTEMPTS = 8;

export interface TenantView {
  id: string;
  name: string;
  /** ISO 8601 time of its creation. */
  created_at: string;
}

/** A channel with its key in clear, shown once. */
export interface CreatedChannel {
  channel: ChannelView;
  api_key: string;
  signing_secret: string | null;
  /**
   * Where the channel's platform delivers, under the service's `basePath` (e.g.
   * `/channels/chat/{id}`): present for a plugin's type that declares its `endpoint`.
   */
  endpoint?: string;
}

/**
 * Programmatic administration: what the `channelkit` command and the admin routes call.
 * Keys and signing secrets are returned in clear only by the call that creates them. Every
 * operation that changes something is recorded in the audit trail, refused ones included,
 * with the actor of {@link ChannelAdmin.as} (`service` by default); a success is recorded
 * in the same transaction as its change.
 */
export interface ChannelAdmin {
  /** Creates a tenant (its name trimmed, 1 to 200 characters). */
  createTenant(input: { name: string }): Promise<{ tenant: TenantRecord }>;
  /**
   * Creates a channel bound to one of the service's flows, with its first key (and a signing
   * secret when it requires signatures, or is a webhook channel), both shown this once.
   */
  createChannel(input: CreateChannelInput): Promise<CreatedChannel>;
  /** A channel as the contract shows it: never its key or signing secret. */
  getChannel(channelId: string): Promise<{ channel: ChannelView }>;
  /**
   * Every tenant, oldest first (by creation time, then id). Not recorded in the audit trail
   * (a read). A caller confined to one tenant (the admin routes) sees only its own.
   */
  listTenants(): Promise<{ tenants: TenantView[] }>;
  /**
   * Channels as {@link getChannel} shows them (never a key or a signing secret), archived
   * ones included, oldest first: one tenant's with `tenantId` (a tenant that does not exist
   * is a `validation_error`), else every tenant's. Not recorded in the audit trail.
   */
  listChannels(query?: { tenantId?: string }): Promise<{ channels: ChannelView[] }>;
  /**
   * Applies a patch. `signing_secret` is set only when `requireSignature` went from false to
   * true on a channel that had no secret (or one the master key no longer opens): a new one,
   * shown this once. A channel that has its secret keeps it, and it is not shown again.
   */
  updateChannel(channelId: string, input: UpdateChannelInput): Promise<{ channel: ChannelView; signing_secret?: string }>;
  /** Revokes the active key and issues a new one with the same prefix and environment. */
  rotateKey(channelId: string): Promise<{ api_key: string; channel: { id: string; api_key_hint: string } }>;
  /** Replaces the signing secret; the previous one stops working at once. */
  rotateSigningSecret(channelId: string): Promise<{ signing_secret: string; channel: { id: string; has_signing_secret: true } }>;
  /**
   * Seals again under the current master key every secret a fallback key sealed (signing
   * secrets, plugin types' secret settings), channel by channel, archived ones left alone;
   * each channel's change recorded in the audit trail (`reseal_secrets`, never a secret) with
   * its write. Safe while instances serve and while another reseal runs: a secret rotated
   * meanwhile is read again, never overwritten. The last step of rotating the master key
   * (`secretKeyFallbacks`; docs/security.md, "Rotating the master key").
   */
  resealSecrets(): Promise<ResealedSecrets>;
  /**
   * Runs the retention sweep now, whatever the schedule: deletes the conversations that ended
   * more than their channel's `retentionDays` ago (a confined caller: its tenant's channels
   * only), each batch audited as `retention_sweep` with its counts. `sweep_in_progress` when
   * another instance is sweeping. What a Cloudflare Worker's Cron Trigger calls.
   */
  sweepRetention(): Promise<RetentionSweepResult>;
  /** The audit trail, newest first, a page at a time (default 50 events, at most 200). */
  audit(query?: AuditQueryInput): Promise<AuditPage>;
  /**
   * Deletes a conversation and every row that belongs to it (messages, runs, recorded
   * streams, idempotency records, live-chat state, plugin values keyed by it) in one
   * transaction, recorded in the audit trail (`delete_conversation`, never a message).
   * Refused with `conversation_not_found` (another tenant's too, for a confined caller) and
   * `run_in_progress` (a run of it is in flight: nothing is deleted), refusals recorded too.
   */
  deleteConversation(input: DeleteConversationInput): Promise<DeletedConversationView>;
  /**
   * Deletes every conversation in which a message's metadata names the end user
   * (`platform_user_id` or `external_user_id`), as {@link deleteConversation} does, one
   * transaction per tenant; recorded as `erase_end_user` with the SHA-256 of the user's id,
   * never the id itself. Refused with `run_in_progress` when one of them has a run in flight.
   */
  eraseEndUser(input: EraseEndUserInput): Promise<ErasedEndUserView>;
  /** Conversations newest first (by creation time, then id), a page at a time (default 50, at most 200). Not recorded (a read). */
  listConversations(input?: ListConversationsInput): Promise<ConversationPage>;
  /**
   * The conversations that match every filter given (of a channel, one conversation, created
   * in `[since, until)`, or in which an end user took part), newest first as
   * {@link listConversations} orders them, each with all its messages oldest first as history
   * shows them. The input is checked, and the export recorded in the audit trail
   * (`export_conversations`, with its filters and the SHA-256 of an end user's id, never a
   * message), before the promise resolves; the conversations are then read from the storage a
   * page at a time as the iterable is consumed. A conversation of another tenant, for a
   * confined caller, is `conversation_not_found`, as {@link deleteConversation} answers.
   *
   * @example
   * for await (const line of await service.admin.exportConversations({ channelId, since: "2025-01-01T00:00:00Z" })) {
   *   process.stdout.write(`${JSON.stringify(line)}\n`);
   * }
   */
  exportConversations(input?: ExportConversationsInput): Promise<AsyncIterable<ConversationExport>>;
  /**
   * The same operations, recorded in the audit trail as done by `actor` (a user name, a
   * service account): `service.admin.as("alice@example.com").rotateKey(id)`.
   */
  as(actor: string): ChannelAdmin;
  /** Tenants stored so far. */
  countTenants(): Promise<number>;
}

/** Who calls the operations, for the audit trail; `tenantId` confines them to one tenant's channels. */
export interface AdminCaller {
  actor: string | null;
  via: AuditEventRecord["via"];
  /** Set for the admin routes: a channel of another tenant is `channel_not_found`. */
  tenantId?: string;
}

/** What an operation acted on, filled in as the operation learns it (for the record of a refusal). */
export interface AuditTarget {
  tenantId: string | null;
  channelId: string | null;
}

/** The audit event of `caller`'s `operation` on `target`: a success when `errorCode` is null. */
export function auditRecord(
  caller: Pick<AdminCaller, "actor" | "via">,
  operation: AuditOperation,
  target: AuditTarget,
  changes: AuditEventRecord["changes"],
  errorCode: string | null,
): AuditEventRecord {
  const ms = Date.now();
  return {
    id: auditEventId(ms),
    timestamp: isoTimestamp(ms),
    tenantId: target.tenantId,
    channelId: target.channelId,
    actor: caller.actor,
    via: caller.via,
    operation,
    changes,
    outcome: errorCode === null ? "success" : "failure",
    errorCode,
  };
}

/**
 * Records that an operation was refused with `error`. A refusal that cannot be recorded is
 * logged, so that the operation's own error still answers.
 */
export async function recordRefusal(
  ctx: ServiceContext,
  caller: AdminCaller,
  operation: AuditOperation,
  target: AuditTarget,
  error: unknown,
  changes: AuditEventRecord["changes"] = {},
): Promise<void> {
  const code = isServiceError(error) ? error.code : "runtime_error";
  await ctx.storage.appendAuditEvent(auditRecord(caller, operation, target, changes, code)).catch((failure) => {
    ctx.logger.error(`channelkit: the refused ${operation} could not be recorded in the audit trail`, failure);
  });
}

/** Deletes conversations of one tenant with the audit event `audit` makes; `run_in_progress` when one has a run in flight. */
async function deleteStored(
  storage: Storage,
  ids: string[],
  tenantId: string,
  audit: (deleted: DeletedConversation[]) => AuditEventRecord,
): Promise<DeletedConversation[]> {
  if (!storage.deleteConversations) throw new ServiceError("runtime_error", "This storage cannot delete conversations (it has no deleteConversations).");
  const result = await storage.deleteConversations({ conversationIds: ids, tenantId, now: isoNow(), audit });
  if (result.busy.length > 0) {
    throw new ServiceError(
      "run_in_progress",
      `A run of conversation ${result.busy.join(", ")} is in flight: wait for it to end (or cancel it), then send this again.`,
    );
  }
  return result.deleted;
}

/** The ids of the conversations in which the end user took part, within `tenantId` when given. */
async function endUserConversations(storage: Storage, externalUserId: string, tenantId: string | undefined): Promise<string[]> {
  if (!storage.findEndUserConversations) throw new ServiceError("runtime_error", "This storage cannot find an end user's conversations.");
  return storage.findEndUserConversations({ externalUserId, ...(tenantId === undefined ? {} : { tenantId }) });
}

/** The conversations of `ids` (within `tenantId` when given), a page of 200 at a time. */
async function listAll(storage: Storage, ids: string[], tenantId: string | undefined) {
  if (ids.length === 0) return [];
  if (!storage.listConversations) throw new ServiceError("runtime_error", "This storage cannot list conversations.");
  const found = [];
  for (let i = 0; i < ids.length; i += 200) {
    found.push(...(await storage.listConversations({ ids: ids.slice(i, i + 200), limit: 200, ...(tenantId === undefined ? {} : { tenantId }) })));
  }
  return found;
}

/** Conversations, and messages of one conversation, read per query of an export. */
const EXPORT_PAGE = 100;

/** A tenant in the wire's names. */
function tenantView(tenant: TenantRecord): TenantView {
  return { id: tenant.id, name: tenant.name, created_at: tenant.createdAt };
}

/** A new signing secret: 256 random bits in base62. */
function generateSigningSecret(): string {
  return `svc_sig_${randomBase62(43)}`;
}

/** Builds the {@link ChannelAdmin} of a service, acting for `caller`. */
export function createChannelAdmin(ctx: ServiceContext, caller: AdminCaller = { actor: "service", via: "service" }): ChannelAdmin {
  const { storage } = ctx;

  const record = (operation: AuditOperation, target: AuditTarget, changes: AuditEventRecord["changes"]) =>
    auditRecord(caller, operation, target, changes, null);

  /**
   * Runs an operation; when it fails, records the refusal (its success is recorded by the
   * operation itself, with its write).
   */
  async function audited<T>(
    operation: AuditOperation,
    target: AuditTarget,
    body: () => Promise<T>,
    attempted = (): AuditEventRecord["changes"] => ({}),
  ): Promise<T> {
    try {
      return await body();
    } catch (error) {
      // Refused before the channel was read (an invalid input): its tenant, when it has one,
      // still files the refusal where the tenant will look.
      if (target.tenantId === null && target.channelId !== null) {
        target.tenantId = (await storage.findChannel(target.channelId).catch(() => null))?.tenantId ?? null;
      }
      await recordRefusal(ctx, caller, operation, target, error, attempted());
      throw error;
    }
  }

  async function newKey(channel: ChannelRecord, now: string): Promise<{ key: string; record: ApiKeyRecord }> {
    const key = generateApiKey(prefixFor(channel.mode, channel.environment));
    const keyRecord: ApiKeyRecord = {
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
    return { key, record: keyRecord };
  }

  /** The caller's channel; another tenant's is not found, as if it did not exist. */
  async function ownChannel(channelId: string, target?: AuditTarget): Promise<ChannelRecord> {
    const channel = await storage.findChannel(channelId);
    if (!channel || (caller.tenantId !== undefined && channel.tenantId !== caller.tenantId)) throw new ServiceError("channel_not_found");
    if (target) target.tenantId = channel.tenantId;
    return channel;
  }

  /** The caller's channel, when it may still be managed (archived is final). */
  async function manageable(channelId: string, target: AuditTarget): Promise<ChannelRecord> {
    const channel = await ownChannel(channelId, target);
    if (channel.state === "archived") throw new ServiceError("channel_archived");
    return channel;
  }

  /** Why a guarded write changed nothing: the channel was archived (or removed) since it was read. */
  async function goneOrArchived(channelId: string): Promise<ServiceError> {
    return new ServiceError((await storage.findChannel(channelId)) ? "channel_archived" : "channel_not_found");
  }

  function requireFlow(name: string): void {
    if (!ctx.flows.has(name)) {
      const known = [...ctx.flows.keys()].join(", ");
      throw new ServiceError("validation_error", `Unknown flow "${name}". Registered flows: ${known}.`);
    }
  }

  /** The target of an operation on `channelId`, before the channel is read. */
  function channelTarget(channelId: string): AuditTarget {
    return { tenantId: caller.tenantId ?? null, channelId };
  }

  return {
    createTenant(input) {
      const target: AuditTarget = { tenantId: null, channelId: null };
      return audited("create_tenant", target, async () => {
        const { name } = validate(createTenantSchema, input);
        const tenant: TenantRecord = { id: crypto.randomUUID(), name, createdAt: isoNow() };
        target.tenantId = tenant.id;
        await storage.createTenant(tenant, record("create_tenant", target, { name: { from: null, to: name } }));
        return { tenant };
      });
    },

    createChannel(input) {
      const tenantId = (input as { tenantId?: unknown } | null)?.tenantId;
      const target: AuditTarget = { tenantId: caller.tenantId ?? (typeof tenantId === "string" ? tenantId : null), channelId: null };
      return audited("create_channel", target, async () => {
        const parsed = validate(createChannelSchema, input);
        // A plugin's type: its settings validated by its schema, its secrets sealed.
        const type = channelTypeFor(ctx, parsed.type, parsed.settings);
        requireFlow(parsed.flow);
        if (!(await storage.findTenant(parsed.tenantId))) {
          throw new ServiceError("validation_error", `No tenant exists with id ${parsed.tenantId}.`);
        }
        const typed = type === null ? null : await newSettings(ctx, type, parsed.settings);
        const now = isoNow();
        // A webhook channel always has its secret (the console's "secret for the webhook"),
        // shown once here, required on its calls only when it requires signatures.
        const signingSecret = parsed.requireSignature || parsed.type === "webhook" ? generateSigningSecret() : null;
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
          livechatWaitTimeoutSeconds: parsed.livechatWaitTimeoutSeconds,
          runTimeoutSeconds: parsed.runTimeoutSeconds,
          retentionDays: parsed.retentionDays,
          rateLimits: parsed.rateLimits,
          resumableStreams: parsed.resumableStreams,
          widget: parsed.widget,
          settings: typed?.settings ?? {},
          sealedSettings: typed?.sealedSettings ?? null,
          createdAt: now,
          updatedAt: now,
        };
        // A plugin's type gets its key as an API channel does (the mode's prefix): its routes may authenticate by it.
        const { key, record: keyRecord } = await newKey(channel, now);
        channel.apiKeyHint = keyRecord.hint;
        const view = channelView(channel, typed?.secretNames ?? []);
        target.channelId = channel.id;
        // Its secrets are recorded by name, as set: never their values.
        const changes = { ...channelChanges(null, view), ...typed?.changes };
        await storage.createChannel(channel, keyRecord, record("create_channel", target, changes));
        const endpoint = channelEndpoint(type, ctx.basePath, channel.id);
        return { channel: view, api_key: key, signing_secret: signingSecret, ...(endpoint === null ? {} : { endpoint }) };
      });
    },

    async getChannel(named) {
      const channelId = canonicalId(named);
      return { channel: await viewOf(ctx, await ownChannel(channelId)) };
    },

    async listTenants() {
      const tenants = caller.tenantId === undefined ? await storage.listTenants() : [await storage.findTenant(caller.tenantId)];
      return { tenants: tenants.flatMap((tenant) => (tenant ? [tenantView(tenant)] : [])) };
    },

    async listChannels(input = {}) {
      const query = validate(listChannelsSchema, input);
      const tenantId = query.tenantId ?? caller.tenantId;
      // Another tenant's, for a caller confined to one, is as unknown as one that does not exist.
      const unknown = caller.tenantId !== undefined && tenantId !== caller.tenantId;
      if (tenantId !== undefined && (unknown || !(await storage.findTenant(tenantId)))) {
        throw new ServiceError("validation_error", `No tenant exists with id ${tenantId}.`);
      }
      const channels = await storage.listChannels(tenantId === undefined ? {} : { tenantId });
      return { channels: await Promise.all(channels.map((channel) => viewOf(ctx, channel))) };
    },

    updateChannel(named, input) {
      const channelId = canonicalId(named);
      const target = channelTarget(channelId);
      return audited("update_channel", target, async () => {
        const parsed = validate(updateChannelSchema, input);
        if (parsed.flow !== undefined) requireFlow(parsed.flow);
        const { flow, settings, ...rest } = parsed;
        for (let attempt = 1; ; attempt++) {
          const channel = await manageable(channelId, target);
          const patch: ChannelPatch = { ...rest, ...(flow === undefined ? {} : { flowName: flow }) };
          // A plugin type's settings: merged into those read, validated whole, secrets sent sealed again.
          let typed: SettingsUpdate | undefined;
          if (settings !== undefined) {
            typed = await updatedSettings(ctx, channel, settings);
            Object.assign(patch, typed.patch);
          }
          let signingSecret: string | undefined;
          if (parsed.requireSignature === true && !channel.requireSignature) {
            // A secret is shown once, when it is made (interface.md): turning the check on
            // keeps the secret the channel has (made at its creation or a rotation, maybe
            // prepared while the check was off) and shows nothing; only a channel without
            // one (or whose secret the master key no longer opens) gets one, shown this once.
            const stored = channel.signingSecretEncrypted === null ? null : await ctx.secrets.decrypt(channel.signingSecretEncrypted);
            if (stored === null) {
              signingSecret = generateSigningSecret();
              patch.signingSecretEncrypted = await ctx.secrets.encrypt(signingSecret);
            }
          }
          const changes = channelChanges(channelView(channel), channelView({ ...channel, ...patch }));
          // The secret itself is never recorded: the event says that it was replaced, as a rotation's does.
          if (signingSecret !== undefined) changes.signing_secret = { from: channel.signingSecretEncrypted === null ? "none" : "previous", to: "new" };
          if (typed !== undefined) Object.assign(changes, typed.changes);
          // The secret handed out must be the one stored: written only if no other PATCH or
          // rotation changed the signature settings since they were read, else read again.
          // Settings merged into those read likewise: written only if they are still those.
          const expected =
            signingSecret === undefined && typed === undefined
              ? undefined
              : {
                  ...(signingSecret === undefined ? {} : { requireSignature: false, signingSecretEncrypted: channel.signingSecretEncrypted }),
                  ...typed?.expected,
                };
          const updated = await storage.updateChannel(channelId, patch, isoNow(), record("update_channel", target, changes), expected);
          if (updated) {
            const view = typed === undefined ? await viewOf(ctx, updated) : channelView(updated, typed.secretNames);
            return signingSecret === undefined ? { channel: view } : { channel: view, signing_secret: signingSecret };
          }
          if (expected === undefined) throw await goneOrArchived(channelId);
          if (attempt === SIGNATURE_RACE_ATTEMPTS) {
            throw new ServiceError("runtime_error", "The channel's signature settings or its type's settings kept changing during this update; send it again.");
          }
        }
      });
    },

    rotateKey(named) {
      const channelId = canonicalId(named);
      const target = channelTarget(channelId);
      return audited("rotate_key", target, async () => {
        const channel = await manageable(channelId, target);
        const now = isoNow();
        const { key, record: keyRecord } = await newKey(channel, now);
        const changes = { api_key_hint: { from: channel.apiKeyHint, to: keyRecord.hint } };
        if (!(await storage.replaceChannelKey(channel.id, keyRecord, now, record("rotate_key", target, changes)))) throw await goneOrArchived(channelId);
        return { api_key: key, channel: { id: channel.id, api_key_hint: keyRecord.hint } };
      });
    },

    rotateSigningSecret(named) {
      const channelId = canonicalId(named);
      const target = channelTarget(channelId);
      return audited("rotate_signing_secret", target, async () => {
        const channel = await manageable(channelId, target);
        const secret = generateSigningSecret();
        const sealed = await ctx.secrets.encrypt(secret);
        // The secret itself is never recorded: the event says that it was replaced.
        const changes = { signing_secret: { from: channel.signingSecretEncrypted === null ? "none" : "previous", to: "new" } };
        const updated = await storage.updateChannel(channelId, { signingSecretEncrypted: sealed }, isoNow(), record("rotate_signing_secret", target, changes));
        if (!updated) throw await goneOrArchived(channelId);
        return { signing_secret: secret, channel: { id: channelId, has_signing_secret: true } };
      });
    },

    resealSecrets() {
      const target: AuditTarget = { tenantId: caller.tenantId ?? null, channelId: null };
      return audited("reseal_secrets", target, async () => {
        const channels = await storage.listChannels(caller.tenantId === undefined ? {} : { tenantId: caller.tenantId });
        const done: ResealedSecrets = { resealed: [], current: 0, unopened: [] };
        for (const channel of channels) {
          const outcome = await resealChannel(ctx, channel, (read, changes) =>
            record("reseal_secrets", { tenantId: read.tenantId, channelId: read.id }, changes),
          );
          if (outcome === "resealed") done.resealed.push(channel.id);
          else if (outcome === "current") done.current++;
          else if (outcome === "unopened") done.unopened.push(channel.id);
        }
        return done;
      });
    },

    async sweepRetention() {
      const channels = await storage.listChannels(caller.tenantId === undefined ? {} : { tenantId: caller.tenantId });
      return sweepRetention(ctx, crypto.randomUUID(), { channels });
    },

    async audit(input = {}) {
      const query = validate(auditQuerySchema, input);
      const tenantId = caller.tenantId ?? query.tenantId;
      const events = await storage.listAuditEvents({
        limit: query.limit + 1,
        ...(tenantId === undefined ? {} : { tenantId }),
        ...(query.channelId === undefined ? {} : { channelId: query.channelId }),
        ...(query.cursor === undefined ? {} : { before: parseAuditCursor(query.cursor) }),
      });
      // One more than asked for says whether there is a next page.
      const page = events.slice(0, query.limit);
      const last = page.at(-1);
      return { events: page.map(auditView), next_cursor: events.length > query.limit && last ? auditCursor(last) : null };
    },

    deleteConversation(input) {
      const named = (input as { conversationId?: unknown } | null)?.conversationId;
      const target: AuditTarget = { tenantId: caller.tenantId ?? null, channelId: null };
      // A refusal records which conversation was asked for (an id, never a message).
      const attempted = (): AuditEventRecord["changes"] => (typeof named === "string" ? { conversation_id: { from: canonicalId(named), to: null } } : {});
      return audited(
        "delete_conversation",
        target,
        async () => {
          const { conversationId } = validate(deleteConversationSchema, input);
          const id = canonicalId(conversationId);
          const conversation = await storage.findConversation(id);
          if (!conversation || (caller.tenantId !== undefined && conversation.tenantId !== caller.tenantId)) throw new ServiceError("conversation_not_found");
          target.tenantId = conversation.tenantId;
          target.channelId = conversation.channelId;
          const result = await deleteStored(storage, [id], conversation.tenantId, (deleted) =>
            record("delete_conversation", target, { conversation_id: { from: id, to: null }, ...countChanges(deleted) }),
          );
          const [deleted] = result;
          if (!deleted) throw new ServiceError("conversation_not_found");
          return { deleted: { conversation_id: id, messages: deleted.messages, runs: deleted.runs } };
        },
        attempted,
      );
    },

    eraseEndUser(input) {
      const tenantId = (input as { tenantId?: unknown } | null)?.tenantId;
      const target: AuditTarget = { tenantId: caller.tenantId ?? (typeof tenantId === "string" ? tenantId : null), channelId: null };
      let attempted: AuditEventRecord["changes"] = {};
      return audited(
        "erase_end_user",
        target,
        async () => {
          const parsed = validate(eraseEndUserSchema, input);
          // The trail proves an erasure without keeping whom: the SHA-256 of the id, which the id hashes to again.
          const userHash = await sha256Hex(parsed.externalUserId);
          attempted = { external_user_sha256: { from: userHash, to: null } };
          const tenant = caller.tenantId ?? parsed.tenantId;
          if (caller.tenantId !== undefined && parsed.tenantId !== undefined && parsed.tenantId !== caller.tenantId) {
            throw new ServiceError("validation_error", `No tenant exists with id ${parsed.tenantId}.`);
          }
          const ids = await endUserConversations(storage, parsed.externalUserId, tenant);
          // One transaction per tenant, each recorded in that tenant's trail.
          const byTenant = new Map<string, string[]>();
          for (const conversation of await listAll(storage, ids, tenant)) {
            byTenant.set(conversation.tenantId, [...(byTenant.get(conversation.tenantId) ?? []), conversation.id]);
          }
          const deleted: DeletedConversation[] = [];
          for (const [owner, owned] of byTenant) {
            const ownerTarget: AuditTarget = { tenantId: owner, channelId: null };
            target.tenantId = owner;
            deleted.push(
              ...(await deleteStored(storage, owned, owner, (gone) =>
                record("erase_end_user", ownerTarget, {
                  external_user_sha256: { from: userHash, to: null },
                  conversation_ids: { from: gone.map((conversation) => conversation.id), to: [] },
                  ...countChanges(gone),
                }),
              )),
            );
          }
          if (deleted.length === 0) {
            // Nothing of the user's is stored: recorded all the same, the proof that it was asked for.
            await storage.appendAuditEvent(
              record("erase_end_user", target, { external_user_sha256: { from: userHash, to: null }, conversation_ids: { from: [], to: [] } }),
            );
          }
          const totals = countChanges(deleted);
          return {
            erased: {
              external_user_id: parsed.externalUserId,
              conversations: deleted.length,
              conversation_ids: deleted.map((conversation) => conversation.id),
              messages: totals.messages.from,
              runs: totals.runs.from,
            },
          };
        },
        // Filled in once the input is read: a refusal records the hash of whom it was for.
        () => attempted,
      );
    },

    async listConversations(input = {}) {
      const query = validate(listConversationsSchema, input);
      const tenantId = caller.tenantId ?? query.tenantId;
      if (!storage.listConversations) throw new ServiceError("runtime_error", "This storage cannot list conversations (it has no listConversations).");
      let ids: string[] | undefined;
      if (query.externalUserId !== undefined) ids = await endUserConversations(storage, query.externalUserId, tenantId);
      const conversations = await storage.listConversations({
        limit: query.limit + 1,
        ...(tenantId === undefined ? {} : { tenantId }),
        ...(query.channelId === undefined ? {} : { channelId: canonicalId(query.channelId) }),
        ...(query.since === undefined ? {} : { since: query.since }),
        ...(query.until === undefined ? {} : { until: query.until }),
        ...(ids === undefined ? {} : { ids }),
        ...(query.cursor === undefined ? {} : { before: parseConversationCursor(query.cursor) }),
      });
      // One more than asked for says whether there is a next page.
      const page = conversations.slice(0, query.limit);
      const channels = new Map<string, ChannelRecord | null>();
      for (const conversation of page) {
        if (!channels.has(conversation.channelId)) channels.set(conversation.channelId, await storage.findChannel(conversation.channelId));
      }
      const last = page.at(-1);
      return {
        conversations: page.map((conversation) => adminConversationView(conversation, channels.get(conversation.channelId) ?? null)),
        next_cursor: conversations.length > query.limit && last ? conversationCursor(last) : null,
      };
    },

    exportConversations(input = {}) {
      const tenantId = (input as { tenantId?: unknown } | null)?.tenantId;
      const target: AuditTarget = { tenantId: caller.tenantId ?? (typeof tenantId === "string" ? tenantId : null), channelId: null };
      return audited("export_conversations", target, async () => {
        const query = validate(exportConversationsSchema, input);
        if (caller.tenantId !== undefined && query.tenantId !== undefined && query.tenantId !== caller.tenantId) {
          throw new ServiceError("validation_error", `No tenant exists with id ${query.tenantId}.`);
        }
        const tenant = caller.tenantId ?? query.tenantId;
        if (!storage.listConversations) throw new ServiceError("runtime_error", "This storage cannot list conversations (it has no listConversations).");
        const listConversations: NonNullable<Storage["listConversations"]> = storage.listConversations.bind(storage);
        const channelId = query.channelId === undefined ? undefined : canonicalId(query.channelId);
        if (channelId !== undefined) target.channelId = channelId;
        let only: ConversationRecord | null | undefined;
        if (query.conversationId !== undefined) {
          only = await storage.findConversation(canonicalId(query.conversationId));
          if (!only || (tenant !== undefined && only.tenantId !== tenant)) throw new ServiceError("conversation_not_found");
          target.tenantId = only.tenantId;
          target.channelId ??= only.channelId;
        }
        // An unconfined export of one channel is filed in its tenant's trail.
        if (target.tenantId === null && channelId !== undefined) target.tenantId = (await storage.findChannel(channelId))?.tenantId ?? null;
        const ids = query.externalUserId === undefined ? undefined : await endUserConversations(storage, query.externalUserId, tenant);
        // The filters, never a message; an end user as the SHA-256 of their id, as erase_end_user records it.
        const changes: AuditEventRecord["changes"] = {};
        if (channelId !== undefined) changes.channel_id = { from: null, to: channelId };
        if (only) changes.conversation_id = { from: null, to: only.id };
        if (query.since !== undefined) changes.since = { from: null, to: query.since };
        if (query.until !== undefined) changes.until = { from: null, to: query.until };
        if (query.externalUserId !== undefined) changes.external_user_sha256 = { from: null, to: await sha256Hex(query.externalUserId) };
        await storage.appendAuditEvent(record("export_conversations", target, changes));

        const matches = (conversation: ConversationRecord): boolean =>
          (channelId === undefined || conversation.channelId === channelId) &&
          (query.since === undefined || conversation.createdAt >= query.since) &&
          (query.until === undefined || conversation.createdAt < query.until) &&
          (ids === undefined || ids.includes(conversation.id));
        const channels = new Map<string, ChannelRecord | null>();
        async function* exported(): AsyncGenerator<ConversationExport> {
          if (ids !== undefined && ids.length === 0) return;
          let before: { createdAt: string; id: string } | undefined;
          for (;;) {
            const page: ConversationRecord[] = only
              ? [only].filter(matches)
              : await listConversations({
                  limit: EXPORT_PAGE,
                  ...(tenant === undefined ? {} : { tenantId: tenant }),
                  ...(channelId === undefined ? {} : { channelId }),
                  ...(query.since === undefined ? {} : { since: query.since }),
                  ...(query.until === undefined ? {} : { until: query.until }),
                  ...(ids === undefined ? {} : { ids }),
                  ...(before === undefined ? {} : { before }),
                });
            for (const conversation of page) {
              if (!channels.has(conversation.channelId)) channels.set(conversation.channelId, await storage.findChannel(conversation.channelId));
              const messages = [];
              for (let after = -1; ; ) {
                const read = await storage.listMessagesAfter(conversation.id, after, EXPORT_PAGE);
                messages.push(...read.map(messageView));
                const last = read.at(-1);
                if (read.length < EXPORT_PAGE || !last) break;
                after = last.turnIndex;
              }
              yield { conversation: adminConversationView(conversation, channels.get(conversation.channelId) ?? null), messages };
            }
            const last = page.at(-1);
            if (only || page.length < EXPORT_PAGE || !last) return;
            before = { createdAt: last.createdAt, id: last.id };
          }
        }
        return { [Symbol.asyncIterator]: exported };
      });
    },

    as(actor) {
      return createChannelAdmin(ctx, { ...caller, actor });
    },

    countTenants: () => storage.countTenants(),
  };
}
