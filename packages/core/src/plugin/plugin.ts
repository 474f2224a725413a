import type { ServiceContext } from "../context.js";
import type { ChannelTypeDefinition } from "./channel-type.js";
import type { RunHooks } from "./hooks.js";
import type { AnyRoute } from "./route.js";
import type { PluginSchema } from "./storage.js";

/** An error code a plugin adds to the service's one table: what `new ServiceError(code)` answers. */
export interface ErrorCodeDefinition {
  /** The HTTP status it answers, 400 to 599. */
  status: number;
  /** What the envelope's `message` says when the thrower gives none. */
  message: string;
}

/**
 * A plugin: what extends a channelkit service. The API, webhook and widget channels, the
 * admin routes, the live-chat inbox and bridge are plugins of this shape too.
 *
 * @example
 * export const echoChannel = () =>
 *   definePlugin({
 *     id: "echo",
 *     channelTypes: [defineChannelType({ name: "echo", settings: z.object({ token: z.string() }), secrets: ["token"] })],
 *     errorCodes: { echo_token_invalid: { status: 401, message: "The echo token does not match." } },
 *     routes: [echoRoute],
 *   });
 */
export interface ChannelPlugin {
  /** Unique among the service's plugins: lower case letters, digits and `-`. Its storage is namespaced by it. */
  id: string;
  /** Routes relative to the service's `basePath`. */
  routes?: readonly AnyRoute[];
  /** Channel types the plugin registers, with their settings. */
  channelTypes?: readonly ChannelTypeDefinition[];
  /** Error codes joining the service's table; a code of another plugin or of channelkit is refused at start-up. */
  errorCodes?: Readonly<Record<string, ErrorCodeDefinition>>;
  /** Tables of the plugin's own, migrated by `storage.migrate()` with the service's (SQL stores). */
  schema?: PluginSchema;
  /** What the plugin hears of runs and live chat. */
  hooks?: RunHooks;
  /**
   * Start-up work, run once by `createChannelService` before the service answers (in the
   * order of `plugins`): check options against the service (throwing fails the start-up),
   * prepare what the routes need.
   */
  init?(ctx: ServiceContext): void | Promise<void>;
  /** Called by `service.close()` once the runs in flight ended, before the storage closes. */
  close?(): void | Promise<void>;
}

/** Declares a plugin (an identity function, for its types). */
export function definePlugin<Plugin extends ChannelPlugin>(plugin: Plugin): Plugin {
  return plugin;
}
