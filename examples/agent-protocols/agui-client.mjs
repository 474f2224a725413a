// Talks to the example's AG-UI channel with AG-UI's HttpAgent (what CopilotKit runs): a run with
// a message, then a second run in the same thread (the threadId is the conversation).
//   node agui-client.mjs [message] [second message]
//   CHANNELKIT_EXAMPLE_CONFIG   the file server.mjs wrote (default ./agent-protocols.json)
//   CHANNELKIT_URL              the server's base URL, instead of the file's
//   CHANNELKIT_URL_2            the base URL the second message goes to (default the first's):
//                               another instance on the same database continues the conversation
import { randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import { HttpAgent } from "@ag-ui/client";

const [first = "hello", second = "again"] = process.argv.slice(2);
const configPath = process.env.CHANNELKIT_EXAMPLE_CONFIG ?? "./agent-protocols.json";

try {
  const config = JSON.parse(await readFile(configPath, "utf8"));
  const { id, key } = config.channels.agui;
  const urls = [process.env.CHANNELKIT_URL ?? config.url, process.env.CHANNELKIT_URL_2 ?? process.env.CHANNELKIT_URL ?? config.url];
  const threadId = randomUUID();

  /** Runs the agent on the server at `baseUrl` in the thread, with `text` as the user's message; answers the reply. */
  async function run(baseUrl, text) {
    const agent = new HttpAgent({ url: `${baseUrl.replace(/\/+$/, "")}/channels/agui/${id}`, headers: { Authorization: `Bearer ${key}` }, threadId });
    agent.addMessage({ id: randomUUID(), role: "user", content: text });
    let failed;
    const { newMessages } = await agent.runAgent(
      {},
      {
        onRunErrorEvent: ({ event }) => {
          failed = event;
        },
      },
    );
    if (failed) throw new Error(`the run failed: ${failed.code ?? "error"}: ${failed.message}`);
    return newMessages
      .filter((message) => message.role === "assistant")
      .map((message) => message.content)
      .join("\n\n");
  }

  console.log(`you: ${first}`);
  console.log(`notes: ${await run(urls[0], first)}`);
  console.log(`(thread ${threadId}, continued with its threadId)`);
  console.log(`you: ${second}`);
  console.log(`notes: ${await run(urls[1], second)}`);
} catch (error) {
  console.error(`agui-client: ${error.message}${error.cause?.code ? ` (${error.cause.code})` : ""}`);
  if (error.code === "ENOENT" || error.cause?.code === "ECONNREFUSED") {
    console.error(`Is the server running? npm start -w examples/agent-protocols serves the channels and writes ${configPath}.`);
  }
  process.exitCode = 1;
}
