// Talks to the example's MCP channel with the MCP SDK's client: calls its tool with a message,
// then calls it again in the same conversation (the conversation_id of the first answer).
//   node mcp-client.mjs [message] [second message]
//   CHANNELKIT_EXAMPLE_CONFIG   the file server.mjs wrote (default ./agent-protocols.json)
//   CHANNELKIT_URL              the server's base URL, instead of the file's
//   CHANNELKIT_URL_2            the base URL the second message goes to (default the first's):
//                               another instance on the same database continues the conversation
import { readFile } from "node:fs/promises";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [first = "hello", second = "again"] = process.argv.slice(2);
const configPath = process.env.CHANNELKIT_EXAMPLE_CONFIG ?? "./agent-protocols.json";

try {
  const config = JSON.parse(await readFile(configPath, "utf8"));
  const { id, key, tool } = config.channels.mcp;
  const urls = [process.env.CHANNELKIT_URL ?? config.url, process.env.CHANNELKIT_URL_2 ?? process.env.CHANNELKIT_URL ?? config.url];

  /** Calls the tool on the server at `baseUrl` (a client connected for the call: the server is stateless). */
  async function takeNote(baseUrl, message, conversationId) {
    const client = new Client({ name: "agent-protocols-example", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(`${baseUrl.replace(/\/+$/, "")}/channels/mcp/${id}`), {
      requestInit: { headers: { Authorization: `Bearer ${key}` } },
    });
    await client.connect(transport);
    try {
      const args = conversationId ? { message, conversation_id: conversationId } : { message };
      const result = await client.callTool({ name: tool, arguments: args });
      const text = result.content.map((part) => (part.type === "text" ? part.text : "")).join("");
      if (result.isError) throw new Error(`the tool failed: ${text}`);
      return result.structuredContent;
    } finally {
      await client.close();
    }
  }

  console.log(`you: ${first}`);
  const answer = await takeNote(urls[0], first);
  console.log(`notes: ${answer.reply}`);
  console.log(`(conversation ${answer.conversation_id}, continued with its conversation_id)`);
  console.log(`you: ${second}`);
  const next = await takeNote(urls[1], second, answer.conversation_id);
  console.log(`notes: ${next.reply}`);
} catch (error) {
  console.error(`mcp-client: ${error.message}${error.cause?.code ? ` (${error.cause.code})` : ""}`);
  if (error.code === "ENOENT" || error.cause?.code === "ECONNREFUSED") {
    console.error(`Is the server running? npm start -w examples/agent-protocols serves the channels and writes ${configPath}.`);
  }
  process.exitCode = 1;
}
