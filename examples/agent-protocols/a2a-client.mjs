// Talks to the example's A2A agent with the A2A SDK's client: reads its agent card, sends it a
// message, then a second one in the same context (the contextId of the first task).
//   node a2a-client.mjs [message] [second message]
//   CHANNELKIT_EXAMPLE_CONFIG   the file server.mjs wrote (default ./agent-protocols.json)
//   CHANNELKIT_URL              the server's base URL, instead of the file's
//   CHANNELKIT_URL_2            the base URL the second message goes to (default the first's):
//                               another instance on the same database continues the conversation
import { randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import { Role, TaskState } from "@a2a-js/sdk";
import { ClientFactory, ClientFactoryOptions, createAuthenticatingFetchWithRetry, JsonRpcTransportFactory } from "@a2a-js/sdk/client";

const [first = "hello", second = "again"] = process.argv.slice(2);
const configPath = process.env.CHANNELKIT_EXAMPLE_CONFIG ?? "./agent-protocols.json";

try {
  const config = JSON.parse(await readFile(configPath, "utf8"));
  const { id, key } = config.channels.a2a;
  const urls = [process.env.CHANNELKIT_URL ?? config.url, process.env.CHANNELKIT_URL_2 ?? process.env.CHANNELKIT_URL ?? config.url];
  const fetchImpl = createAuthenticatingFetchWithRetry(fetch, {
    headers: async () => ({ Authorization: `Bearer ${key}` }),
    shouldRetryWithHeaders: async () => undefined,
  });
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new JsonRpcTransportFactory({ fetchImpl })] }),
  );

  /** Sends `text` to the agent on the server at `baseUrl`, in `contextId` when given; answers the completed task. */
  async function send(baseUrl, text, contextId = "") {
    // The agent's address with a trailing "/": its card is under it.
    const client = await factory.createFromUrl(`${baseUrl.replace(/\/+$/, "")}/channels/a2a/${id}/`);
    const task = await client.sendMessage({
      tenant: "",
      configuration: undefined,
      metadata: {},
      message: {
        messageId: randomUUID(),
        contextId,
        taskId: "",
        role: Role.ROLE_USER,
        parts: [{ content: { $case: "text", value: text }, metadata: {}, filename: "", mediaType: "text/plain" }],
        metadata: {},
        extensions: [],
        referenceTaskIds: [],
      },
    });
    const said = (parts = []) => parts.map((part) => (part.content?.$case === "text" ? part.content.value : "")).join("");
    if (task.status?.state !== TaskState.TASK_STATE_COMPLETED) {
      throw new Error(`the task ended ${TaskState[task.status?.state] ?? "without a state"}: ${said(task.status?.message?.parts)}`);
    }
    return { contextId: task.contextId, conversationId: task.metadata?.channelkit_conversation_id, reply: said(task.artifacts[0]?.parts) };
  }

  console.log(`you: ${first}`);
  const answer = await send(urls[0], first);
  console.log(`notes: ${answer.reply}`);
  console.log(`(context ${answer.contextId}, conversation ${answer.conversationId}, continued with its contextId)`);
  console.log(`you: ${second}`);
  const next = await send(urls[1], second, answer.contextId);
  console.log(`notes: ${next.reply}`);
} catch (error) {
  console.error(`a2a-client: ${error.message}${error.cause?.code ? ` (${error.cause.code})` : ""}`);
  if (error.code === "ENOENT" || error.cause?.code === "ECONNREFUSED") {
    console.error(`Is the server running? npm start -w examples/agent-protocols serves the channels and writes ${configPath}.`);
  }
  process.exitCode = 1;
}
