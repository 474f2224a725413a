import { AgentCard } from "@a2a-js/sdk";
import type { ChannelRecord } from "@channelkit/core";
import { a2aSettingsOf } from "./settings.js";

/** The version the card gives for the agent: channelkit's A2A endpoint, not the flow. */
const AGENT_VERSION = "1.0.0";

/** The name of the card's one security scheme. */
const BEARER = "channel_key";

/**
 * A channel's agent card, in the protocol's JSON (what `GET .well-known/agent-card.json`
 * answers): its name, description and skills from the channel's settings, its JSON-RPC
 * endpoint at `endpoint`, streaming, and the channel's key as HTTP bearer.
 */
export function agentCardJson(channel: ChannelRecord, endpoint: string): Record<string, unknown> {
  const settings = a2aSettingsOf(channel.settings);
  const skills = settings.skills ?? [{ id: "chat", name: "Chat", description: "Answers a message in a conversation.", tags: ["chat"] }];
  return {
    name: settings.name ?? channel.name ?? "channelkit agent",
    description: settings.description ?? "An agent served by channelkit.",
    version: AGENT_VERSION,
    supportedInterfaces: [{ url: endpoint, protocolBinding: "JSONRPC", protocolVersion: "1.0" }],
    capabilities: { streaming: true, pushNotifications: false },
    securitySchemes: {
      [BEARER]: { httpAuthSecurityScheme: { scheme: "Bearer", description: "The A2A channel's key (`svc_sk_...`) as a Bearer token." } },
    },
    securityRequirements: [{ schemes: { [BEARER]: { list: [] } } }],
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain"],
    skills: skills.map((skill) => ({ id: skill.id, name: skill.name, description: skill.description, tags: skill.tags })),
  };
}

/** The card as the SDK's request handler holds it (its own objects, read from the JSON). */
export function agentCard(channel: ChannelRecord, endpoint: string): AgentCard {
  return AgentCard.fromJSON(agentCardJson(channel, endpoint));
}
