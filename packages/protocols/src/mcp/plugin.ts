import { type ChannelPlugin, defineChannelType, definePlugin, defineRoute, routeDocs } from "@channelkit/core";
import { z } from "zod";
import { handleMcp, methodNotAllowed } from "./server.js";
import { MCP_CHANNEL_TYPE, mcpSettingsSchema } from "./settings.js";

/** Where an MCP client reaches a channel's flow (MCP's Streamable HTTP endpoint). */
export const MCP_PATH = "/channels/mcp/:channel_id";

/** An MCP channel: its flow as one tool of an MCP server; its key is the client's Bearer token. */
export const mcpChannelType = defineChannelType({
  name: MCP_CHANNEL_TYPE,
  description:
    "An MCP server (Streamable HTTP) with one tool that runs the channel's flow: `tool_name` (default `ask`), `tool_description`, `server_name`. The channel's key is the client's Bearer token.",
  settings: mcpSettingsSchema,
  endpoint: "/channels/mcp/{channel_id}",
  history: true,
});

const tag = { name: "MCP", description: "MCP channels (`@channelkit/protocols`): a flow as a tool of an MCP server." };
const parameters = [{ name: "channel_id", in: "path" as const, required: true, description: "The MCP channel's id." }];

/** One JSON-RPC message of MCP, as the document shows it (the SDK's transport checks it). */
const jsonRpcMessage = z
  .object({
    jsonrpc: z.literal("2.0"),
    id: z.union([z.string(), z.number()]).optional(),
    method: z.string().optional(),
    params: z.record(z.string(), z.unknown()).optional(),
  })
  .loose();

/**
 * MCP as a channel: a channel of type `mcp` is an MCP server at `/channels/mcp/{channel_id}`
 * (Streamable HTTP, stateless) whose one tool runs the channel's flow: input `{ message,
 * conversation_id? }`, result the reply with `{ conversation_id, status, reply }`.
 *
 * @example
 * createChannelService({ storage, flows, plugins: [mcpChannels()] });
 * // then: new StreamableHTTPClientTransport(new URL(`${base}/channels/mcp/${channelId}`),
 * //   { requestInit: { headers: { Authorization: `Bearer ${key}` } } })
 */
export function mcpChannels(): ChannelPlugin {
  return definePlugin({
    id: "mcp",
    channelTypes: [mcpChannelType],
    routes: [
      defineRoute({
        method: "POST",
        path: MCP_PATH,
        auth: "channelKey",
        body: jsonRpcMessage,
        doc: {
          operationId: "mcpMessage",
          summary: "Send an MCP message to the channel's MCP server",
          description:
            "MCP's Streamable HTTP transport (stateless: no `Mcp-Session-Id`), answered by `@modelcontextprotocol/sdk`. `tools/list` lists one tool, named by the channel's `tool_name`; `tools/call` runs the flow on `{ message, conversation_id? }` and answers its reply as text content and `structuredContent` `{ conversation_id, status, reply }`. A refused key is the contract's status with a JSON-RPC error, code -32001, the contract's code in `error.data.code`.",
          tag,
          parameters,
          body: { required: true, description: "A JSON-RPC message of MCP (`initialize`, `tools/list`, `tools/call`, a notification)." },
          responses: {
            200: {
              description: "The JSON-RPC answer, as server-sent events (progress notifications, then the result).",
              other: { mediaType: "text/event-stream", description: "JSON-RPC messages, one per `data:` line." },
            },
            202: { description: "A notification or a response was taken." },
          },
          errors: [...routeDocs.CHANNEL_KEY, "payload_too_large"],
        },
        handle: async (call, ctx) => handleMcp(call.request, call.params.channel_id, ctx, await call.rawBody()),
      }),
      ...(["GET", "DELETE"] as const).map((method) =>
        defineRoute({
          method,
          path: MCP_PATH,
          auth: "none",
          rateLimited: false,
          doc: {
            operationId: method === "GET" ? "mcpStream" : "mcpEndSession",
            summary: method === "GET" ? "A stream of the MCP server's own messages (none: 405)" : "End an MCP session (none: 405)",
            description:
              "The MCP server is stateless: it has no session and sends nothing outside a POST's answer. 405, as MCP's Streamable HTTP transport says of such a server.",
            tag,
            parameters,
            responses: { 405: { description: "Not allowed: POST only (`Allow: POST`)." } },
            errors: [],
          },
          handle: () => methodNotAllowed(),
        }),
      ),
    ],
  });
}
