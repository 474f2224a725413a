import type { ChannelRecord } from "../storage/types.js";
import type { RunOutcome } from "./outcome.js";

/** The flow a run executed, as the response's metadata names it. */
export interface FlowIdentity {
  id: string;
  name: string;
  version: string | null;
}

/** The execute response document (`stream` false) of a finished run. */
export function runDocument(outcome: RunOutcome, channel: ChannelRecord, flow: FlowIdentity) {
  return {
    run_id: outcome.runId,
    conversation_id: outcome.conversationId,
    status: outcome.status,
    output: {
      result: outcome.result ?? null,
      error: outcome.error,
      // What the stream sent as text: an assistant message with no text (a step that only
      // calls tools, kept in history for its tool calls) is not part of the reply.
      messages: outcome.produced
        .filter((message) => message.role === "assistant" && message.content !== "")
        .map((message) => ({ role: "assistant" as const, content: message.content })),
      metadata: {
        channel_id: channel.id,
        flow_id: flow.id,
        flow_name: flow.name,
        flow_version: flow.version,
        environment: channel.environment,
        execution_order: outcome.executionOrder,
        started_at: outcome.startedAt,
        completed_at: outcome.completedAt,
        livechat_mode: outcome.livechatMode,
      },
    },
    usage: {
      total_nodes: outcome.executionOrder.length,
      duration_ms: outcome.durationMs,
    },
    error: outcome.status === "error" ? { code: "flow_error", message: outcome.error ?? "The flow failed." } : null,
  };
}
