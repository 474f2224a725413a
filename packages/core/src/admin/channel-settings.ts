import { isBuiltInChannelType, openSealedSettings, sealSettings, splitSettings, unopenedSettingsMessage } from "../channels/settings.js";
import type { ServiceContext } from "../context.js";
import { ServiceError } from "../http/errors.js";
import type { ChannelTypeDefinition } from "../plugin/channel-type.js";
import { BUILT_IN_CHANNEL_TYPES } from "../plugin/registry.js";
import type { AuditEventRecord, ChannelRecord, ExpectedChannel } from "../storage/types.js";
import { type ChannelView, channelView } from "./channel-view.js";

/** What the admin reads of the service for a channel's type and settings. */
type SettingsServices = Pick<ServiceContext, "secrets" | "plugins">;

/** A `validation_error` naming each failing field in `details`, its message naming them too (unless `message` is given). */
function refused(details: { path: string; message: string }[], message?: string): ServiceError {
  return new ServiceError("validation_error", message ?? details.map((detail) => `${detail.path}: ${detail.message}`).join("; "), { details });
}

/** Every type a channel of this service may have: the built-in ones, then those of its plugins. */
function registeredTypes(ctx: SettingsServices): string[] {
  return [...BUILT_IN_CHANNEL_TYPES, ...ctx.plugins.channelTypes.keys()];
}

/**
 * The plugin type a new channel is of, or null for a built-in type (which takes no
 * `settings`). An unknown type is a `validation_error` naming the registered ones.
 */
export function channelTypeFor(ctx: SettingsServices, type: string, settings: unknown): ChannelTypeDefinition | null {
  if (isBuiltInChannelType(type)) {
    if (settings !== undefined) throw builtInRefusal(ctx, type);
    return null;
  }
  const definition = ctx.plugins.channelTypes.get(type);
  if (definition === undefined) {
    // As an unknown flow's: the message names the registered ones.
    const message = `Unknown channel type "${type}". Registered types: ${registeredTypes(ctx).join(", ")}.`;
    throw refused([{ path: "type", message }], message);
  }
  return definition;
}

function builtInRefusal(ctx: SettingsServices, type: string): ServiceError {
  const plugins = [...ctx.plugins.channelTypes.keys()];
  return refused([
    {
      path: "settings",
      message: `${type} channels take no settings: settings are for the channel types of plugins (${plugins.length > 0 ? `registered: ${plugins.join(", ")}` : "none is registered"}).`,
    },
  ]);
}

/**
 * `input` checked by the type's schema: each failing field named `settings.<field>`, a field
 * the type does not have refused (an admin wants a typo caught). Answers the fields as sent
 * (its schema's defaults and transformations are applied when the settings are read, by
 * `channelSettings`): what is stored, and what a later update is merged into.
 */
export function validateSettings(type: ChannelTypeDefinition, input: Record<string, unknown>): Record<string, unknown> {
  const parsed = type.settings.safeParse(input);
  const fields = Object.keys(type.settings.shape);
  // A loose schema keeps the fields it does not name: those are its own to accept.
  const kept = parsed.success ? (parsed.data as Record<string, unknown>) : {};
  const unknown = Object.keys(input).filter((name) => !fields.includes(name) && !Object.hasOwn(kept, name));
  const details = [
    ...(parsed.success ? [] : parsed.error.issues.map((issue) => ({ path: ["settings", ...issue.path.map(String)].join("."), message: issue.message }))),
    ...unknown.map((name) => ({
      path: `settings.${name}`,
      message: `the ${type.name} channel type has no setting "${name}" (its settings: ${fields.join(", ")})`,
    })),
  ];
  if (details.length > 0) throw refused(details);
  const values: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(input)) if (value !== undefined) values[name] = value;
  return values;
}

/** The names of a channel's secret settings that are set, sorted; null when the master key cannot open them. */
export async function secretNamesOf(ctx: SettingsServices, channel: ChannelRecord): Promise<string[] | null> {
  if (isBuiltInChannelType(channel.type)) return [];
  const opened = await openSealedSettings(ctx.secrets, channel);
  return opened === null ? null : Object.keys(opened).sort();
}

/** {@link channelView} with the names of the secret settings that are set (opened for the purpose, never shown). */
export async function viewOf(ctx: SettingsServices, channel: ChannelRecord): Promise<ChannelView> {
  return channelView(channel, await secretNamesOf(ctx, channel));
}

/** What a new channel of a plugin's type stores, and what its audit event says of its secrets. */
export interface NewSettings {
  settings: Record<string, unknown>;
  sealedSettings: string | null;
  secretNames: string[];
  /** `settings.<secret>: { from: "none", to: "new" }` for each secret set: never its value. */
  changes: AuditEventRecord["changes"];
}

/** The settings of a new channel of `type`, validated, split, and its secrets sealed. */
export async function newSettings(ctx: SettingsServices, type: ChannelTypeDefinition, input: Record<string, unknown> | undefined): Promise<NewSettings> {
  const values = validateSettings(type, input ?? {});
  const { settings, secrets } = splitSettings(type, values);
  const secretNames = Object.keys(secrets).sort();
  const changes: AuditEventRecord["changes"] = {};
  for (const name of secretNames) changes[`settings.${name}`] = { from: "none", to: "new" };
  return { settings, sealedSettings: await sealSettings(ctx.secrets, secrets), secretNames, changes };
}

/** What an update of a channel's settings writes, expects to find, and records. */
export interface SettingsUpdate {
  patch: Pick<ChannelRecord, "settings" | "sealedSettings">;
  /** The settings as read: the write is applied only if no other update changed them since. */
  expected: Pick<ExpectedChannel, "settings" | "sealedSettings">;
  /** `settings.<secret>: { from, to }` for each secret sent: never its value. */
  changes: AuditEventRecord["changes"];
  secretNames: string[];
}

/**
 * Merges `sent` into the channel's stored settings (a field sent as null is removed, as in a
 * JSON Merge Patch, RFC 7396), validates the whole with the channel's type, and seals the
 * secrets again when one was sent or removed (a secret sent is its rotation). A built-in type
 * refuses settings; a type no plugin of the service registers cannot be validated, and is
 * refused. Secrets that the master key cannot open are replaced only when every secret of the
 * type is sent (`channel_settings_unavailable` otherwise): a typo in `CHANNELKIT_SECRET_KEY`
 * must not lose them.
 */
export async function updatedSettings(ctx: SettingsServices, channel: ChannelRecord, sent: Record<string, unknown>): Promise<SettingsUpdate> {
  if (isBuiltInChannelType(channel.type)) throw builtInRefusal(ctx, channel.type);
  const type = ctx.plugins.channelTypes.get(channel.type);
  if (type === undefined) {
    throw refused([
      {
        path: "settings",
        message: `the channel type "${channel.type}" of this channel is registered by none of this service's plugins (registered types: ${registeredTypes(ctx).join(", ")}), so its settings cannot be checked: add the plugin that registers it.`,
      },
    ]);
  }
  const secretNames = new Set<string>(type.secrets ?? []);
  let opened = await openSealedSettings(ctx.secrets, channel);
  const unreadable = opened === null;
  if (opened === null) {
    const missing = [...secretNames].filter((name) => !Object.hasOwn(sent, name));
    if (missing.length > 0) {
      throw new ServiceError(
        "channel_settings_unavailable",
        `${unopenedSettingsMessage(channel.id)} To replace them, send every secret setting of the ${type.name} type (${[...secretNames].join(", ")}).`,
      );
    }
    opened = {};
  }
  const merged: Record<string, unknown> = { ...channel.settings, ...opened };
  for (const [name, value] of Object.entries(sent)) {
    if (value === null) delete merged[name];
    else merged[name] = value;
  }
  const values = validateSettings(type, merged);
  const { settings, secrets } = splitSettings(type, values);
  const changes: AuditEventRecord["changes"] = {};
  const secretsChanged = unreadable || Object.keys(sent).some((name) => secretNames.has(name));
  for (const name of Object.keys(sent)
    .filter((name) => secretNames.has(name))
    .sort()) {
    const from = unreadable ? "unreadable" : Object.hasOwn(opened, name) ? "previous" : "none";
    const to = Object.hasOwn(secrets, name) ? "new" : "none";
    if (from !== "none" || to !== "none") changes[`settings.${name}`] = { from, to };
  }
  return {
    patch: { settings, sealedSettings: secretsChanged ? await sealSettings(ctx.secrets, secrets) : channel.sealedSettings },
    expected: { settings: channel.settings, sealedSettings: channel.sealedSettings },
    changes,
    secretNames: Object.keys(secrets).sort(),
  };
}
