import type { RegisteredFlow, ServiceContext } from "../context.js";
import { ServiceError } from "../http/errors.js";
import type { ChannelRecord } from "../storage/types.js";

/** The channel/flow pairs already logged as unregistered, per service: one error line each, not one per request. */
const logged = new WeakMap<ServiceContext, Set<string>>();

/**
 * The registered flow a channel is bound to. A channel bound to a flow this service does not
 * register (the start-up warns of each) is the host's misconfiguration, or an instance that
 * does not know a flow yet during a deploy: `503 flow_unavailable`, whose message names the
 * flow, logged once per channel and flow.
 */
export function channelFlow(ctx: ServiceContext, channel: ChannelRecord): RegisteredFlow {
  const registered = ctx.flows.get(channel.flowName);
  if (!registered) {
    let seen = logged.get(ctx);
    if (!seen) {
      seen = new Set();
      logged.set(ctx, seen);
    }
    const key = `${channel.id}\u0000${channel.flowName}`;
    if (!seen.has(key)) {
      seen.add(key);
      ctx.logger.error(
        `channelkit: channel ${channel.id} is bound to flow "${channel.flowName}", which is not registered (registered: ${[...ctx.flows.keys()].join(", ") || "none"}): its runs answer 503 flow_unavailable`,
      );
    }
    throw new ServiceError("flow_unavailable", `This channel is bound to the flow "${channel.flowName}", which this service does not register.`);
  }
  return registered;
}

/**
 * {@link channelFlow} for a run on a conversation the request names and that was not read
 * before (the run's ticket checks it): when the flow is unavailable, `checkConversation`
 * runs first, so that an unknown or foreign conversation is still refused before the flow
 * is (decisions.md, "Order of checks on execute": the conversation, then the run).
 */
export async function channelFlowAfter(ctx: ServiceContext, channel: ChannelRecord, checkConversation: () => Promise<unknown>): Promise<RegisteredFlow> {
  try {
    return channelFlow(ctx, channel);
  } catch (error) {
    await checkConversation();
    throw error;
  }
}
