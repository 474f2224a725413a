import { z } from "zod";

/** The channel type of MCP channels. */
export const MCP_CHANNEL_TYPE = "mcp";

/** MCP's rule for a tool's name (the SDK's `validateToolName`): 1 to 128 letters, digits, `_`, `-` or `.`. */
const TOOL_NAME = /^[A-Za-z0-9._-]{1,128}$/;

/** An MCP channel's settings: how its one tool, and its server, introduce themselves to the client. */
export const mcpSettingsSchema = z.object({
  tool_name: z
    .string()
    .regex(TOOL_NAME, "tool_name must be 1 to 128 letters, digits, '_', '-' or '.' (MCP's rule for tool names)")
    .default("ask")
    .describe("The name of the tool the flow is exposed as."),
  tool_description: z.string().min(1).max(2000).optional().describe("What the tool does, as the model reads it."),
  server_name: z.string().min(1).max(200).optional().describe("The name the MCP server gives in its `initialize` answer."),
});

/** An MCP channel's settings, defaults applied. */
export type McpSettings = z.output<typeof mcpSettingsSchema>;

/** The settings of a stored channel: read again with the schema, so that a default left unstored applies. */
export function mcpSettingsOf(stored: unknown): McpSettings {
  const parsed = mcpSettingsSchema.safeParse(stored ?? {});
  // Stored settings were validated when written; a field that no longer passes falls back to the defaults.
  return parsed.success ? parsed.data : mcpSettingsSchema.parse({});
}
