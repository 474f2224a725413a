import { z } from "zod";
import { conversationModeSchema } from "../livechat/schemas.js";
import type { UIStreamEvent } from "./ui-stream.js";

/**
 * The parts of the AI SDK's UI message stream that the service emits (execute with
 * `stream`, the widget's chat, the resumable streams), one per SSE event: `data-run` first,
 * then per assistant message `text-start`, `text-delta`..., `text-end`, then `finish`, or
 * `error` and nothing after it.
 */
export const uiMessageStreamPartSchema = z.discriminatedUnion("type", [
  z
    .object({ type: z.literal("data-run"), data: z.object({ run_id: z.uuid(), conversation_id: z.uuid() }) })
    .meta({ title: "DataRunPart", description: "The first event: the run's ids. Keep `conversation_id` to resume the conversation." }),
  z.object({ type: z.literal("text-start"), id: z.string() }).meta({ title: "TextStartPart", description: "An assistant message begins; `id` names it." }),
  z
    .object({ type: z.literal("text-delta"), id: z.string(), delta: z.string() })
    .meta({ title: "TextDeltaPart", description: "A fragment of the message's text." }),
  z.object({ type: z.literal("text-end"), id: z.string() }).meta({ title: "TextEndPart", description: "The message is complete." }),
  z
    .object({
      type: z.literal("finish"),
      finishReason: z.literal("stop"),
      messageMetadata: z
        .object({
          status: z.enum(["success", "pending", "cancelled"]).meta({
            description:
              "How the run ended, as the JSON answer's `status`: `success`, `pending` (the flow paused, or handed over to live chat) or `cancelled`. A run that failed ends with `error` instead.",
          }),
          livechat_mode: conversationModeSchema.nullable().meta({
            description:
              "As the JSON answer's `output.metadata.livechat_mode`: `livechat_waiting` when the run handed over, the current mode when a human has the conversation, otherwise null.",
          }),
        })
        .meta({
          title: "FinishMetadata",
          description: "The run's outcome. The AI SDK's client merges it into the message's `metadata` (`message.metadata.status`).",
        }),
    })
    .meta({
      title: "FinishPart",
      description: "The normal end of the stream (also when the run paused, handed over or was cancelled: see `messageMetadata`).",
    }),
  z
    .object({ type: z.literal("error"), errorText: z.string() })
    .meta({ title: "ErrorPart", description: "The run failed after the stream began: the stream ends here, with no `finish`." }),
]);

/** The schema and the type the stream is written with must agree: a compile error otherwise. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const agrees: Same<z.output<typeof uiMessageStreamPartSchema>, UIStreamEvent> = true;
void agrees;
