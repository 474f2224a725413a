import {
  type ChannelRecord,
  channelFlow,
  conversationIdSchema,
  type IncomingRequest,
  isServiceError,
  type RunOutcome,
  type ServiceContext,
  userText,
} from "@channelkit/core";
import type { CallToolResult, ServerNotification, ServerRequest } from "@modelcontextprotocol/sdk/types.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import { z } from "zod";

/** The tool's input: the user's message, and the conversation it continues (a new one without it). */
export const toolInput = z.object({
  message: userText("message").describe("The message for the agent."),
  conversation_id: conversationIdSchema
    .optional()
    .describe("The conversation to continue: the `conversation_id` of an earlier result. Leave it out to start a new conversation."),
});

/** The tool's structured result, also described to the client as the tool's output schema. */
export const toolOutput = z.object({
  conversation_id: z.string().describe("The conversation of the call: pass it again to continue it."),
  status: z
    .enum(["success", "pending", "error", "cancelled"])
    .describe("`pending`: the agent asked a question (the reply); the next call in the conversation answers it."),
  reply: z.string().describe("The agent's reply, its messages separated by a blank line."),
});

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/**
 * One call of the tool: a run of the channel's flow in the call's conversation, pulled to its
 * end. Its text is sent as progress notifications when the client asked for them (a
 * `progressToken`), and answered whole as the result. A paused flow's question is a
 * `pending` result; a failed flow, or a run refused (an unknown conversation, one busy), is
 * a result with `isError`, as MCP wants tool failures told to the model.
 */
export async function callTool(
  ctx: ServiceContext,
  channel: ChannelRecord,
  request: IncomingRequest,
  input: z.output<typeof toolInput>,
  extra: Extra,
): Promise<CallToolResult> {
  let conversationId = input.conversation_id ?? "";
  try {
    const run = await ctx.runs.start({
      channel,
      flow: channelFlow(ctx, channel),
      conversation: input.conversation_id === undefined ? null : { id: input.conversation_id },
      payload: input.message,
      metadata: { mcp_request_id: String(extra.requestId) },
      // The client leaving stops the run, as on every streaming route.
      request,
      live: true,
    });
    conversationId = run.conversationId;
    const progressToken = extra._meta?.progressToken;
    let parts = 0;
    let next = await run.steps.next();
    while (!next.done) {
      if (progressToken !== undefined && next.value.type === "text-delta") {
        parts += 1;
        await extra.sendNotification({ method: "notifications/progress", params: { progressToken, progress: parts, message: next.value.delta } });
      }
      next = await run.steps.next();
    }
    return resultOf(next.value);
  } catch (error) {
    if (!isServiceError(error)) throw error;
    const message = `${error.code}: ${error.message}`;
    return {
      isError: true,
      content: [{ type: "text", text: message }],
      structuredContent: { conversation_id: conversationId, status: "error", reply: message },
    };
  }
}

/** The result of a finished run: its reply (the question of a paused flow), or the flow's error. */
function resultOf(outcome: RunOutcome): CallToolResult {
  const reply = outcome.produced
    .filter((message) => message.role === "assistant" && message.content !== "")
    .map((message) => message.content)
    .join("\n\n");
  const structuredContent = { conversation_id: outcome.conversationId, status: outcome.status, reply };
  if (outcome.status === "error") {
    // As the API channel's `flow_error`: the flow's message, and what it wrote before failing in `reply`.
    const text = `flow_error: ${outcome.error ?? "The flow failed."}`;
    return { isError: true, content: [{ type: "text", text }], structuredContent };
  }
  return { content: [{ type: "text", text: reply }], structuredContent };
}
