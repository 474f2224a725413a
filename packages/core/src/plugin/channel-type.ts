import type { z } from "zod";

/**
 * A type of channel a plugin brings (`telegram`, `slack`, `mcp`, ...): channels of this type
 * are created, listed, updated and archived like the built-in ones (`service.admin`, the admin
 * routes, the CLI), and hold the plugin's own settings. Settings named in `secrets` are sealed
 * at rest with the service's master key (AES-256-GCM), never returned by a read, and replaced
 * by writing them again (a rotation).
 */
export interface ChannelTypeDefinition<Settings extends z.ZodObject = z.ZodObject> {
  /** The `type` of its channels: lower case letters, digits, `_` and `-`; not `api` or `webhook`. */
  name: string;
  /** What the type is for, shown in the OpenAPI document and the CLI. */
  description?: string;
  /**
   * The channel's settings. Validated on create and update (a failure is 422
   * `validation_error` naming the field, e.g. `settings.bot_token`); an update merges the
   * fields it sends into the stored ones, and is validated whole.
   */
  settings: Settings;
  /** The settings that are credentials (a bot token, a signing secret): sealed at rest, never returned. */
  secrets?: readonly (keyof z.infer<Settings> & string)[];
  /**
   * The path a channel's platform delivers to, one of the plugin's routes with `{channel_id}`
   * for the channel's id, e.g. `/channels/chat/{channel_id}`. Creating a channel of the type
   * answers it as `endpoint`, under the service's `basePath`: the address to give the platform.
   */
  endpoint?: string;
  /**
   * Whether a channel's key reads its conversations' history on the API channel's route
   * (`GET /public/v1/api/conversations/{id}/messages`), as an API channel's does: a chat
   * platform's conversations, read by the host's own code. Its other routes stay the API
   * channel's alone (403 `wrong_channel_type`).
   */
  history?: boolean;
}

/** A channel's `endpoint` (see {@link ChannelTypeDefinition.endpoint}), under `basePath`; null for a type without one. */
export function channelEndpoint(type: Pick<ChannelTypeDefinition, "endpoint"> | null, basePath: string, channelId: string): string | null {
  return type?.endpoint === undefined ? null : basePath + type.endpoint.replaceAll("{channel_id}", encodeURIComponent(channelId));
}

/** Declares a channel type with its settings' types kept. */
export function defineChannelType<Settings extends z.ZodObject>(definition: ChannelTypeDefinition<Settings>): ChannelTypeDefinition<Settings> {
  return definition;
}
