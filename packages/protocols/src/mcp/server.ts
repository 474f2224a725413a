import { authenticateRequest, fromResponse, type IncomingRequest, isServiceError, type Reply, ServiceError, type ServiceContext } from "@channelkit/core";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { MCP_CHANNEL_TYPE, mcpSettingsOf } from "./settings.js";
import { callTool, toolInput, toolOutput } from "./tool.js";

/** The version the MCP server gives in its `initialize` answer. */
const SERVER_VERSION = "1.0.0";

/** JSON-RPC's code for an error of the server's own (the implementation-defined range); the contract's code is in `data`. */
export const SERVICE_ERROR_RPC_CODE = -32001;

/**
 * `POST /channels/mcp/{channel_id}`: one MCP message (or batch) of a client, answered by the
 * SDK's Streamable HTTP transport in stateless mode: a server and a transport per request, so
 * that any instance answers any request (the conversation, not a session, carries the state).
 * The key is checked first: a refusal is the contract's status with a JSON-RPC error whose
 * `data` holds the contract's code and message, as the SDK's client shows it. An answer as
 * server-sent events (a tool call's, with its progress) holds its connection for the run: it
 * counts against the caps on open streams, past which the request is 429 `too_many_streams`.
 */
export async function handleMcp(request: IncomingRequest, channelId: string, ctx: ServiceContext, body: Uint8Array): Promise<Response | Reply> {
  try {
    const found = await authenticateRequest(request, ctx, { channelTypes: [MCP_CHANNEL_TYPE] });
    const { channel } = found;
    // Another MCP channel's key is no key of this one.
    if (channel.id !== channelId) throw new ServiceError("invalid_api_key", "This key is not the key of the channel in the path.");
    const settings = mcpSettingsOf(channel.settings);
    const server = new McpServer({ name: settings.server_name ?? channel.name ?? `channelkit-${channel.id}`, version: SERVER_VERSION });
    server.registerTool(
      settings.tool_name,
      {
        ...(settings.tool_description === undefined ? {} : { description: settings.tool_description }),
        inputSchema: toolInput,
        outputSchema: toolOutput,
      },
      (input, extra) => callTool(ctx, channel, request, input, extra),
    );
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, maxRequestBodySize: ctx.maxBodyBytes });
    await server.connect(transport);
    const answer = () => transport.handleRequest(webRequest(request, body));
    // A client that takes no event stream is answered JSON, whole: no stream to count.
    if (!(request.headers.get("accept") ?? "").includes("text/event-stream")) return await answer();
    return await ctx.openStreams.forKey(request, found, async () => fromResponse(await answer()));
  } catch (error) {
    if (!isServiceError(error)) throw error;
    return rpcError(await ctx.limits.afterRefusal(request, error));
  }
}

/**
 * `GET` (a stream of the server's own messages) and `DELETE` (the end of a session): neither
 * exists without sessions; 405 is what the SDK's client expects of a stateless server.
 */
export function methodNotAllowed(): Response {
  const body = { jsonrpc: "2.0", error: { code: -32000, message: "Method not allowed: this MCP server is stateless, POST only." }, id: null };
  return Response.json(body, { status: 405, headers: { Allow: "POST" } });
}

/** A refusal as a JSON-RPC error, with the contract's status, headers (`WWW-Authenticate`, `Retry-After`) and code. */
function rpcError(error: ServiceError): Response {
  const body = { jsonrpc: "2.0", error: { code: SERVICE_ERROR_RPC_CODE, message: error.message, data: { code: error.code } }, id: null };
  return Response.json(body, { status: error.status, headers: error.headers ?? {} });
}

/** The request as the SDK's transport reads it: a Web `Request` with the bytes received (the run, not the SDK, follows the client leaving). */
function webRequest(request: IncomingRequest, body: Uint8Array): Request {
  const headers = new Headers();
  request.headers.forEach((value, name) => {
    headers.set(name, value);
  });
  return new Request(request.url, { method: request.method, headers, body: body as BodyInit });
}
