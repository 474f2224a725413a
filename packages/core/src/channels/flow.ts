import type { RegisteredFlow, ServiceContext } from "../context.js";
import { ServiceError } from "../http/errors.js";
import type { ChannelRecord } from "../storage/types.js";

/**
 * The registered flow a channel is bound to. A channel bound to a flow this service does not
 * register is the host's misconfiguration: logged, and `500 runtime_error` for the caller.
 */
export function channelFlow(ctx: ServiceContext, channel: ChannelRecord): RegisteredFlow {
  const registered = ctx.flows.get(channel.flowName);
  if (!registered) {
    ctx.logger.error(`channelkit: channel ${channel.id} is bound to flow "${channel.flowName}", which is not registered`);
    throw new ServiceError("runtime_error");
  }
  return registered;
}
