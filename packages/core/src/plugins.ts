import type { ServiceContext } from "./context.js";
import type { Route } from "./http/router.js";

/**
 * A plugin extends the service with routes; the API channel itself is one. Later channels
 * (webhook, widget) and features (live chat, rate limits) plug in the same way, without
 * changes to the pipeline.
 */
export interface ChannelPlugin {
  /** Unique name, for error messages. */
  name: string;
  /** Routes the plugin answers, relative to the service's `basePath`. */
  routes?: Route<ServiceContext>[];
}
