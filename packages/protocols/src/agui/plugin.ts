import { type ChannelPlugin, defineChannelType, definePlugin, defineRoute, routeDocs } from "@channelkit/core";
import { z } from "zod";
import { AGUI_CHANNEL_TYPE, runAgent } from "./run.js";

/** Where an AG-UI client runs a channel's flow. */
export const AGUI_PATH = "/channels/agui/:channel_id";

/** An AG-UI channel: nothing to set but an optional display name; its key is the client's Bearer token. */
export const aguiChannelType = defineChannelType({
  name: AGUI_CHANNEL_TYPE,
  description:
    "An AG-UI endpoint (agent front ends such as CopilotKit): `POST` AG-UI's run input, with the channel's key as Bearer token, to stream the run's AG-UI events.",
  settings: z.object({ name: z.string().min(1).max(200).optional() }),
  endpoint: "/channels/agui/{channel_id}",
  history: true,
});

/**
 * AG-UI as a channel: a channel of type `agui` answers `POST /channels/agui/{channel_id}`
 * with AG-UI's event stream of a run of its flow. AG-UI's `threadId` is the conversation
 * (any id the client makes), the last user message is the run's payload.
 *
 * @example
 * createChannelService({ storage, flows, plugins: [aguiChannels()] });
 * // then: new HttpAgent({ url: `${base}/channels/agui/${channelId}`, headers: { Authorization: `Bearer ${key}` } })
 */
export function aguiChannels(): ChannelPlugin {
  return definePlugin({
    id: "agui",
    channelTypes: [aguiChannelType],
    routes: [
      defineRoute({
        method: "POST",
        path: AGUI_PATH,
        auth: "channelKey",
        // A front end in the browser sends it with a publishable key, as the API channel's routes.
        cors: { headers: ["Authorization", "Content-Type"] },
        doc: {
          operationId: "aguiRun",
          summary: "Run the channel's flow as an AG-UI agent",
          description:
            "The body is AG-UI's `RunAgentInput` (`threadId`, `runId`, `messages`, ...), checked with `@ag-ui/core`'s schema (422 `validation_error` otherwise). `threadId` is the conversation, created by its first run; the last `user` message is the flow's payload. The answer is AG-UI's event stream: `RUN_STARTED`, the flow's text as `TEXT_MESSAGE_START` / `TEXT_MESSAGE_CONTENT` / `TEXT_MESSAGE_END`, a `STATE_SNAPSHOT` of the flow's state when it keeps one, then `RUN_FINISHED`, or `RUN_ERROR` when the flow fails. The client leaving stops the run.",
          tag: { name: "AG-UI", description: "AG-UI channels (`@channelkit/protocols`): a flow as an AG-UI agent." },
          parameters: [{ name: "channel_id", in: "path", required: true, description: "The AG-UI channel's id." }, routeDocs.ORIGIN],
          responses: {
            200: {
              description: "The run as AG-UI events, one per `data:` line.",
              other: { mediaType: "text/event-stream", description: "AG-UI events (`@ag-ui/core`'s `BaseEvent`s) as server-sent events." },
              headers: ["Cache-Control-Stream", "X-Accel-Buffering"],
            },
          },
          errors: [...routeDocs.CHANNEL_KEY, ...routeDocs.JSON_BODY, "flow_unavailable", "conversation_busy", ...routeDocs.STREAMED],
        },
        handle: ({ request, params }, ctx) => runAgent(request, params.channel_id, ctx),
      }),
    ],
  });
}
