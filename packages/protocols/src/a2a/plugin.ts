import { type ChannelPlugin, defineChannelType, definePlugin, defineRoute, routeDocs } from "@channelkit/core";
import { z } from "zod";
import { A2A_PLUGIN_ID, a2aInstance, handleCard, handleRpc } from "./server.js";
import { A2A_CHANNEL_TYPE, a2aSettingsSchema } from "./settings.js";

/** Where an A2A client sends its JSON-RPC requests to a channel's agent. */
export const A2A_PATH = "/channels/a2a/:channel_id";

/** Where a channel's agent card is, at the well-known path A2A names under the agent's address. */
export const A2A_CARD_PATH = "/channels/a2a/:channel_id/.well-known/agent-card.json";

/** An A2A channel: its flow as an A2A agent; its key is the client's Bearer token. */
export const a2aChannelType = defineChannelType({
  name: A2A_CHANNEL_TYPE,
  description:
    "An A2A agent (JSON-RPC, A2A 1.0) that runs the channel's flow: its card at `.well-known/agent-card.json` under the endpoint, named and described by `name`, `description` and `skills`. The channel's key is the client's Bearer token.",
  settings: a2aSettingsSchema,
  endpoint: "/channels/a2a/{channel_id}",
  history: true,
});

const tag = { name: "A2A", description: "A2A channels (`@channelkit/protocols`): a flow as an Agent2Agent agent." };
const parameters = [{ name: "channel_id", in: "path" as const, required: true, description: "The A2A channel's id." }];

/** One JSON-RPC request of A2A, as the document shows it (the SDK's handler checks it). */
const jsonRpcRequest = z
  .object({
    jsonrpc: z.literal("2.0"),
    id: z.union([z.string(), z.number(), z.null()]).optional(),
    method: z.string(),
    params: z.record(z.string(), z.unknown()).optional(),
  })
  .loose();

/**
 * A2A as a channel: a channel of type `a2a` is an A2A agent whose card is at
 * `/channels/a2a/{channel_id}/.well-known/agent-card.json` and whose JSON-RPC endpoint is
 * `/channels/a2a/{channel_id}` (`@a2a-js/sdk`'s handler: `SendMessage`,
 * `SendStreamingMessage`, `GetTask`, `CancelTask`, `SubscribeToTask`). A `contextId` is a
 * conversation, a task is a run of the channel's flow.
 *
 * @example
 * createChannelService({ storage, flows, plugins: [a2aChannels()] });
 * // then: await ClientFactory.createFromUrl(`${base}/channels/a2a/${channelId}`) with the key as Bearer
 */
export function a2aChannels(): ChannelPlugin {
  const instance = a2aInstance();
  return definePlugin({
    id: A2A_PLUGIN_ID,
    channelTypes: [a2aChannelType],
    routes: [
      defineRoute({
        method: "GET",
        path: A2A_CARD_PATH,
        auth: "none",
        doc: {
          operationId: "a2aAgentCard",
          summary: "The A2A channel's agent card",
          description:
            "The agent card (A2A 1.0, the protocol's JSON): `name`, `description` and `skills` from the channel's settings, its JSON-RPC interface at `/channels/a2a/{channel_id}` on the request's origin, streaming, and the channel's key as HTTP Bearer. Needs no key; 404 for a channel that is not an active A2A channel.",
          tag,
          parameters,
          responses: { 200: { description: "The agent card." } },
          errors: ["channel_not_found", "rate_limited"],
        },
        handle: (call, ctx) => handleCard(call.request, call.params.channel_id, ctx),
      }),
      defineRoute({
        method: "POST",
        path: A2A_PATH,
        auth: "channelKey",
        body: jsonRpcRequest,
        doc: {
          operationId: "a2aMessage",
          summary: "Send an A2A JSON-RPC request to the channel's agent",
          description:
            "A2A's JSON-RPC binding (A2A 1.0, `A2A-Version: 1.0`), answered by `@a2a-js/sdk`: `SendMessage` runs the flow in the conversation of the message's `contextId` and answers the task; `SendStreamingMessage` and `SubscribeToTask` answer server-sent events; `GetTask` and `CancelTask` read and stop a task. A refused key is the contract's status with a JSON-RPC error, code -32000, the contract's code in `error.data.code`.",
          tag,
          parameters,
          body: { required: true, description: "A JSON-RPC request of A2A." },
          responses: {
            200: {
              description: "The JSON-RPC response; for a streaming method, server-sent events.",
              other: { mediaType: "text/event-stream", description: "JSON-RPC responses, one per `data:` line." },
            },
          },
          errors: [...routeDocs.CHANNEL_KEY, "payload_too_large"],
        },
        handle: async (call, ctx) => handleRpc(call.request, call.params.channel_id, ctx, await call.rawBody(), instance),
      }),
    ],
  });
}
