import type { RunAgentInput } from "@ag-ui/core";
import { RunAgentInputSchema } from "@ag-ui/core/schemas";
import {
  authenticateRequest,
  channelFlow,
  type IncomingRequest,
  parseJson,
  type Reply,
  readRawBody,
  requireJsonContentType,
  SSE_HEADERS,
  ServiceError,
  type ServiceContext,
  validate,
} from "@channelkit/core";
import { AguiEventStream } from "./events.js";

/** The channel type of AG-UI channels. */
export const AGUI_CHANNEL_TYPE = "agui";

/**
 * `POST /channels/agui/{channel_id}`: runs the channel's flow on AG-UI's run input and answers
 * its event stream. Checks, first failure wins: the key (the channel's, of type `agui`), the
 * channel in the path, the media type, the size, the body (AG-UI's own schema), a user message.
 */
export async function runAgent(request: IncomingRequest, channelId: string, ctx: ServiceContext): Promise<Reply> {
  const found = await authenticateRequest(request, ctx, { channelTypes: [AGUI_CHANNEL_TYPE] });
  // Another AG-UI channel's key is no key of this one.
  if (found.channel.id !== channelId) throw new ServiceError("invalid_api_key", "This key is not the key of the channel in the path.");
  requireJsonContentType(request);
  const input = validate(RunAgentInputSchema, parseJson(await readRawBody(request, ctx.maxBodyBytes))) as RunAgentInput;
  const payload = lastUserText(input);
  // The stream holds its connection for the whole run: it counts against the caps on open streams.
  return await ctx.openStreams.forKey(request, found, async () => {
    const run = await ctx.runs.start({
      channel: found.channel,
      flow: channelFlow(ctx, found.channel),
      // Any thread id the client makes is a conversation of the channel, found again by it.
      conversation: { externalKey: input.threadId },
      payload,
      metadata: { agui_run_id: input.runId },
      request,
      live: true,
      flowEvents: true,
    });
    return { status: 200, headers: { ...SSE_HEADERS }, body: new AguiEventStream(ctx, run, input) };
  });
}

/**
 * The text of the last user message: what the flow answers. AG-UI's client sends the whole
 * thread; the conversation's history is the service's own, so only the newest message is new.
 */
function lastUserText(input: RunAgentInput): string {
  for (let index = input.messages.length - 1; index >= 0; index--) {
    const message = input.messages[index];
    if (message?.role !== "user") continue;
    const { content } = message;
    if (typeof content === "string") return content;
    return content.flatMap((part) => (part.type === "text" ? [part.text] : [])).join("\n");
  }
  throw new ServiceError("validation_error", "messages has no user message: the flow answers the last one.", {
    details: [{ path: "messages", message: "messages has no user message" }],
  });
}
