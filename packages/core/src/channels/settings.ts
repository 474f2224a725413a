import type { z } from "zod";
import type { SecretBox } from "../auth/secret-box.js";
import type { PluginServices } from "../context.js";
import { ServiceError } from "../http/errors.js";
import type { ChannelTypeDefinition } from "../plugin/channel-type.js";
import { BUILT_IN_CHANNEL_TYPES } from "../plugin/registry.js";
import type { ChannelRecord } from "../storage/types.js";

/** Whether `type` is one of channelkit's own channel types (`api`, `webhook`), whose settings are the channel's own fields. */
export function isBuiltInChannelType(type: string): boolean {
  return (BUILT_IN_CHANNEL_TYPES as readonly string[]).includes(type);
}

/**
 * A channel's secret settings, opened: `{}` when it has none, null when the master key
 * cannot open them (they were sealed under another key).
 */
export async function openSealedSettings(secrets: SecretBox, channel: Pick<ChannelRecord, "sealedSettings">): Promise<Record<string, unknown> | null> {
  if (channel.sealedSettings === null || channel.sealedSettings === undefined) return {};
  const opened = await secrets.decrypt(channel.sealedSettings);
  if (opened === null) return null;
  try {
    const value: unknown = JSON.parse(opened);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** Seals a type's secret settings as one JSON object; null when there are none. */
export async function sealSettings(secrets: SecretBox, values: Record<string, unknown>): Promise<string | null> {
  return Object.keys(values).length === 0 ? null : secrets.encrypt(JSON.stringify(values));
}

/** Validated settings of a type, split into those stored in clear and its secrets (sealed). */
export function splitSettings(
  type: ChannelTypeDefinition,
  values: Record<string, unknown>,
): { settings: Record<string, unknown>; secrets: Record<string, unknown> } {
  const secretNames = new Set<string>(type.secrets ?? []);
  const settings: Record<string, unknown> = {};
  const secrets: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(values)) {
    if (value === undefined) continue;
    if (secretNames.has(name)) secrets[name] = value;
    else settings[name] = value;
  }
  return { settings, secrets };
}

/** What {@link channelSettings} reads of the service: its master key, and the types its plugins register. */
export interface SettingsContext {
  secrets: SecretBox;
  plugins?: PluginServices;
}

/** The message of a channel whose sealed settings the master key cannot open. */
export function unopenedSettingsMessage(channelId: string): string {
  return `The secret settings of channel ${channelId} cannot be opened with the configured master key (CHANNELKIT_SECRET_KEY): they were sealed under another key. Start with the master key that sealed them, or send the channel's secret settings again (admin.updateChannel(id, { settings })), which seals them with the key in use.`;
}

/**
 * A channel's full settings, its secrets opened: what a plugin's route reads to talk to its
 * platform (a bot token, a signing secret). Typed by the channel type when it is given, and
 * then checked against it (the channel must be of that type); without it, the type the
 * service's plugins register for the channel is used when there is one.
 *
 * Fails with `ServiceError("channel_settings_unavailable")` (503) when the master key cannot
 * open the sealed settings (the service was started with another `CHANNELKIT_SECRET_KEY` than
 * the one that sealed them), and with an `Error` when the stored settings no longer match the
 * type's schema (the plugin changed it since): neither message holds a setting's value.
 *
 * @example
 * const telegramType = defineChannelType({ name: "telegram", settings: z.object({ bot_token: z.string() }), secrets: ["bot_token"] });
 * // in a route of the plugin:
 * const { channel } = await authenticateRequest(call.request, ctx, { channelTypes: ["telegram"] });
 * const { bot_token } = await channelSettings(ctx, channel, telegramType);
 */
export function channelSettings<Settings extends z.ZodObject>(
  ctx: SettingsContext,
  channel: ChannelRecord,
  type: ChannelTypeDefinition<Settings>,
): Promise<z.infer<Settings>>;
export function channelSettings(ctx: SettingsContext, channel: ChannelRecord): Promise<Record<string, unknown>>;
export async function channelSettings(ctx: SettingsContext, channel: ChannelRecord, type?: ChannelTypeDefinition): Promise<Record<string, unknown>> {
  if (type !== undefined && channel.type !== type.name) {
    throw new TypeError(`channelkit: channel ${channel.id} is of type "${channel.type}", not "${type.name}"`);
  }
  const opened = await openSealedSettings(ctx.secrets, channel);
  if (opened === null) throw new ServiceError("channel_settings_unavailable", unopenedSettingsMessage(channel.id));
  const merged = { ...channel.settings, ...opened };
  const definition = type ?? ctx.plugins?.channelTypes.get(channel.type);
  if (definition === undefined) return merged;
  const parsed = definition.settings.safeParse(merged);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `settings.${issue.path.join(".")}: ${issue.message}`).join("; ");
    throw new Error(
      `channelkit: the stored settings of channel ${channel.id} no longer match the "${definition.name}" channel type's schema (${problems}): update them (admin.updateChannel(id, { settings }))`,
    );
  }
  return parsed.data as Record<string, unknown>;
}
