import type { ServiceContext } from "../context.js";
import { ServiceError } from "../http/errors.js";
import { isoTimestamp } from "../runs/timestamp.js";
import type { AuditEventRecord, ChannelRecord, DeleteConversationsInput, DeletedConversation, Storage } from "../storage/types.js";
import { countChanges } from "../admin/audit.js";
import { auditRecord } from "../admin/operations.js";
import { metrics } from "@opentelemetry/api";
import { TELEMETRY_SCOPE } from "../telemetry/telemetry.js";

/** What a retention sweep deleted, all channels together. */
export interface RetentionSweepResult {
  /** Channels with a `retention_days` whose conversations were looked at. */
  channels: number;
  /** Conversations deleted, with their messages and runs. */
  conversations: number;
  messages: number;
  runs: number;
}

/** The plugin store the sweep coordinates instances through: its periods and its lease. */
export const RETENTION_STORE = "channelkit-retention";
/** The lease one sweep holds across instances, renewed after every batch. */
const SWEEP_LEASE = "sweep";
const SWEEP_LEASE_MS = 60_000;
/** Conversations found, and deleted in one transaction, at a time. */
const BATCH = 100;
const DAY_MS = 86_400_000;
/** Who the audit trail says deleted: the sweep, on the service's side. */
const SWEEPER = { actor: "retention", via: "service" } as const;

/** The channels a sweep looks at: those with a retention, archived ones included (their data is kept no longer than they say). */
export function retainedChannels(channels: readonly ChannelRecord[]): ChannelRecord[] {
  return channels.filter((channel) => typeof channel.retentionDays === "number");
}

/**
 * Deletes, channel by channel, the conversations that ended more than the channel's
 * `retentionDays` before `now`, a batch per transaction with an audit event
 * (`retention_sweep`, the counts, never a message), under the sweep's lease so that one
 * instance sweeps at a time. `sweep_in_progress` when another holds the lease; `stopped` ends
 * it between two batches (the service closing).
 */
export async function sweepRetention(
  ctx: ServiceContext,
  holder: string,
  options: { now?: number; stopped?: () => boolean; channels?: ChannelRecord[] } = {},
): Promise<RetentionSweepResult> {
  const { storage } = ctx;
  if (!storage.findEndedConversations || !storage.deleteConversations) {
    throw new ServiceError("runtime_error", "This storage cannot sweep conversations (it has no findEndedConversations or deleteConversations).");
  }
  const lease = storage.pluginStore(RETENTION_STORE);
  if (!(await lease.acquireLease(SWEEP_LEASE, holder, SWEEP_LEASE_MS))) throw new ServiceError("sweep_in_progress");
  const result: RetentionSweepResult = { channels: 0, conversations: 0, messages: 0, runs: 0 };
  try {
    const now = options.now ?? Date.now();
    for (const channel of retainedChannels(options.channels ?? (await storage.listChannels()))) {
      result.channels++;
      const before = isoTimestamp(now - (channel.retentionDays as number) * DAY_MS);
      for (;;) {
        if (options.stopped?.()) return result;
        const ids = await storage.findEndedConversations({ channelId: channel.id, before, limit: BATCH });
        if (ids.length === 0) break;
        const deleted = await deleteEnded(ctx, channel, ids, now);
        for (const conversation of deleted) {
          result.conversations++;
          result.messages += conversation.messages;
          result.runs += conversation.runs;
        }
        // A batch with a run in flight (a conversation woken since it was found) ends this channel's turn: the next sweep finds the rest.
        if (deleted.length < ids.length) break;
        if (!(await lease.acquireLease(SWEEP_LEASE, holder, SWEEP_LEASE_MS))) throw new ServiceError("sweep_in_progress");
      }
    }
    return result;
  } finally {
    // Rare (a sweep a period), so the counter is made here: without an SDK it is the API's no-op.
    if (result.conversations > 0) {
      metrics
        .getMeter(TELEMETRY_SCOPE)
        .createCounter("channelkit.retention.deleted", { unit: "{conversation}", description: "Conversations the retention sweep deleted." })
        .add(result.conversations);
    }
    await lease.releaseLease(SWEEP_LEASE, holder).catch(() => undefined);
  }
}

/** Deletes `ids`, leaving out those with a run in flight, with the audit event of the batch. */
async function deleteEnded(ctx: ServiceContext, channel: ChannelRecord, ids: string[], now: number): Promise<DeletedConversation[]> {
  const { storage } = ctx;
  const remove = (input: DeleteConversationsInput) => (storage.deleteConversations as NonNullable<Storage["deleteConversations"]>).call(storage, input);
  const input = { tenantId: channel.tenantId, now: isoTimestamp(now), audit: (deleted: DeletedConversation[]) => sweptEvent(channel, deleted) };
  const first = await remove({ ...input, conversationIds: ids });
  if (first.busy.length === 0) return first.deleted;
  const busy = new Set(first.busy);
  const idle = ids.filter((id) => !busy.has(id));
  return idle.length === 0 ? [] : (await remove({ ...input, conversationIds: idle })).deleted;
}

/** The audit event of a batch the sweep deleted: counts, never a message. */
function sweptEvent(channel: ChannelRecord, deleted: DeletedConversation[]): AuditEventRecord {
  const changes = {
    retention_days: { from: channel.retentionDays, to: channel.retentionDays },
    conversations: { from: deleted.length, to: 0 },
    ...countChanges(deleted),
  };
  return auditRecord(SWEEPER, "retention_sweep", { tenantId: channel.tenantId, channelId: channel.id }, changes, null);
}
