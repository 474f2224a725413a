import type { Logger, ServiceContext } from "../context.js";
import { registerErrorCodes } from "../http/errors.js";
import type { ChannelTypeDefinition } from "./channel-type.js";
import type { RunHooks } from "./hooks.js";
import type { ChannelPlugin } from "./plugin.js";

/** The channel types channelkit itself serves: their settings are the channel's own fields. */
export const BUILT_IN_CHANNEL_TYPES = ["api", "webhook"] as const;

const PLUGIN_ID = /^[a-z][a-z0-9-]*$/;
const TYPE_NAME = /^[a-z][a-z0-9_-]*$/;

/** What the service's plugins registered: channel types, and the hooks that hear of runs. */
export class PluginRegistry {
  readonly #types = new Map<string, ChannelTypeDefinition>();
  readonly #hooks: RunHooks[] = [];
  readonly #logger: Logger;
  #ctx: ServiceContext | null = null;

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  /** The context the hooks are given: the service's, once it is made. */
  attach(ctx: ServiceContext): void {
    this.#ctx = ctx;
  }

  /** The channel types of plugins, by name. */
  get channelTypes(): ReadonlyMap<string, ChannelTypeDefinition> {
    return this.#types;
  }

  /** The hooks plugins declared, by name: a run's path builds no event nobody hears. */
  readonly #heard = new Set<keyof RunHooks>();

  /** Whether any plugin hears of `name`. */
  hears(name: keyof RunHooks): boolean {
    return this.#heard.has(name);
  }

  /**
   * Tells every plugin that hears of `name`, without waiting: a hook never holds a run up,
   * and one that throws or rejects is logged.
   */
  notify<Name extends keyof RunHooks>(name: Name, event: Parameters<NonNullable<RunHooks[Name]>>[0]): void {
    for (const hooks of this.#hooks) {
      const hook = hooks[name] as ((event: unknown, ctx: ServiceContext) => void | Promise<void>) | undefined;
      if (!hook) continue;
      try {
        const result = hook.call(hooks, event, this.#ctx as ServiceContext);
        if (result && typeof result.then === "function") result.then(undefined, (error) => this.#failed(name, error));
      } catch (error) {
        this.#failed(name, error);
      }
    }
  }

  add(plugin: ChannelPlugin): void {
    if (plugin.errorCodes) registerErrorCodes(plugin.id, plugin.errorCodes);
    for (const type of plugin.channelTypes ?? []) {
      if (!TYPE_NAME.test(type.name) || (BUILT_IN_CHANNEL_TYPES as readonly string[]).includes(type.name)) {
        throw new TypeError(
          `channelkit: plugin "${plugin.id}" registers the channel type "${type.name}": lower case letters, digits, _ and -, and not api or webhook`,
        );
      }
      if (this.#types.has(type.name)) throw new TypeError(`channelkit: two plugins register the channel type "${type.name}"`);
      const fields = Object.keys(type.settings.shape);
      const unknown = (type.secrets ?? []).filter((name) => !fields.includes(name));
      if (unknown.length > 0) throw new TypeError(`channelkit: the channel type "${type.name}" names secrets that are not settings: ${unknown.join(", ")}`);
      this.#types.set(type.name, type);
    }
    if (plugin.hooks) {
      this.#hooks.push(plugin.hooks);
      for (const name of Object.keys(plugin.hooks) as (keyof RunHooks)[]) if (plugin.hooks[name]) this.#heard.add(name);
    }
  }

  #failed(name: string, error: unknown): void {
    this.#logger.error(`channelkit: a plugin's ${name} hook failed`, error);
  }
}

/**
 * Registers each plugin (its error codes, channel types and hooks), then starts them in
 * their order (`init`). Refuses two plugins of one id, and an id that is not a plain name.
 */
export async function mountPlugins(plugins: readonly ChannelPlugin[], ctx: ServiceContext, registry: PluginRegistry): Promise<ChannelPlugin[]> {
  const ids = new Set<string>();
  for (const plugin of plugins) {
    if (typeof plugin.id !== "string" || !PLUGIN_ID.test(plugin.id)) {
      throw new TypeError(`channelkit: a plugin's id is lower case letters, digits and -, not ${JSON.stringify(plugin.id)}`);
    }
    if (ids.has(plugin.id)) throw new TypeError(`channelkit: two plugins have the id "${plugin.id}"`);
    ids.add(plugin.id);
    registry.add(plugin);
  }
  for (const plugin of plugins) if (plugin.init) await plugin.init(ctx);
  return [...plugins];
}
