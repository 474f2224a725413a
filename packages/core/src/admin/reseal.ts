import type { ServiceContext } from "../context.js";
import { ServiceError } from "../http/errors.js";
import { isoNow } from "../runs/timestamp.js";
import type { AuditEventRecord, ChannelPatch, ChannelRecord } from "../storage/types.js";

/** What `resealSecrets` did, channel by channel (archived channels are left as they are). */
export interface ResealedSecrets {
  /** Channels whose secrets a fallback key had sealed, now sealed under the current master key. */
  resealed: string[];
  /** Channels with secrets that were already sealed under the current master key. */
  current: number;
  /**
   * Channels holding a secret that neither the current master key nor a fallback opens: it
   * stays as it is (start with the key that sealed it, or rotate the signing secret / send the
   * settings again). Their other secrets are resealed all the same.
   */
  unopened: string[];
}

/** How often one channel is read again when its secrets changed while it was being resealed. */
const RESEAL_ATTEMPTS = 8;

type SealedField = "signingSecretEncrypted" | "sealedSettings";

/** The audit trail's name of each sealed field: what changed, never the secret. */
const AUDITED_AS: Record<SealedField, string> = { signingSecretEncrypted: "signing_secret", sealedSettings: "secret_settings" };

/**
 * Seals `channel`'s secrets again under the current master key where a fallback key sealed
 * them. Written only if they are still those read (a rotation or another reseal meanwhile
 * makes it read the channel again), with the audit event `audit` makes, in one transaction.
 */
export async function resealChannel(
  ctx: ServiceContext,
  read: ChannelRecord,
  audit: (channel: ChannelRecord, changes: AuditEventRecord["changes"]) => AuditEventRecord,
): Promise<"resealed" | "current" | "unopened" | "none"> {
  let channel: ChannelRecord | null = read;
  for (let attempt = 1; channel !== null && channel.state !== "archived"; attempt++) {
    const patch: ChannelPatch = {};
    const changes: AuditEventRecord["changes"] = {};
    let unopened = false;
    let sealed = false;
    for (const field of ["signingSecretEncrypted", "sealedSettings"] as const) {
      const value = channel[field];
      if (value === null || value === undefined) continue;
      sealed = true;
      const under = await ctx.secrets.sealedUnder(value);
      if (under === null) unopened = true;
      if (under !== "fallback") continue;
      patch[field] = await ctx.secrets.encrypt((await ctx.secrets.decrypt(value)) as string);
      changes[AUDITED_AS[field]] = { from: "fallback key", to: "current key" };
    }
    if (Object.keys(patch).length === 0) return unopened ? "unopened" : sealed ? "current" : "none";
    const expected = { signingSecretEncrypted: channel.signingSecretEncrypted, sealedSettings: channel.sealedSettings ?? null };
    if (await ctx.storage.updateChannel(channel.id, patch, isoNow(), audit(channel, changes), expected)) return unopened ? "unopened" : "resealed";
    if (attempt === RESEAL_ATTEMPTS) {
      throw new ServiceError("runtime_error", `The secrets of channel ${channel.id} kept changing while they were resealed; run the reseal again.`);
    }
    channel = await ctx.storage.findChannel(channel.id);
  }
  return "none";
}
