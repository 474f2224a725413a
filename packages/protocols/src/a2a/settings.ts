import { z } from "zod";

/** The channel type of A2A channels. */
export const A2A_CHANNEL_TYPE = "a2a";

/** One skill of the agent card: what the agent can do, as a client's agent reads it. */
const skillSchema = z.object({
  id: z.string().min(1).max(200).describe("The skill's id, unique in the card."),
  name: z.string().min(1).max(200).describe("The skill's name."),
  description: z.string().min(1).max(2000).describe("What the skill does."),
  tags: z.array(z.string().min(1).max(100)).max(50).default([]).describe("Keywords of the skill."),
});

/** An A2A channel's settings: how its agent card introduces the flow. */
export const a2aSettingsSchema = z.object({
  name: z.string().min(1).max(200).optional().describe("The agent's name in its card (the channel's name, else `channelkit agent`)."),
  description: z.string().min(1).max(2000).optional().describe("What the agent does, in its card."),
  skills: z.array(skillSchema).max(50).optional().describe("The skills of the card (one skill `chat` when absent)."),
});

/** An A2A channel's settings, defaults applied. */
export type A2aSettings = z.output<typeof a2aSettingsSchema>;

/** The settings of a stored channel: read again with the schema, so that a default left unstored applies. */
export function a2aSettingsOf(stored: unknown): A2aSettings {
  const parsed = a2aSettingsSchema.safeParse(stored ?? {});
  // Stored settings were validated when written; a field that no longer passes falls back to the defaults.
  return parsed.success ? parsed.data : a2aSettingsSchema.parse({});
}
