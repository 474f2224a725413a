import { type Tool, tool } from "ai";
import { z } from "zod";

/**
 * What the tools of one run ask of the conversation beyond the model's reply: a human, or
 * the user's answer to a question. The run's flow reads it once the model stops.
 */
export class HumanRequest {
  handover: { message: string | undefined } | null = null;
  question: string | null = null;

  /** Whether a tool asked for a human or a question: the model's loop stops there. */
  get asked(): boolean {
    return this.handover !== null || this.question !== null;
  }
}

/** The key under which a run's {@link HumanRequest} travels in the tools' `experimental_context`. */
const CONTEXT_KEY = "channelkit";

/** The `experimental_context` of a run's tools. */
export function toolContext(request: HumanRequest): Record<string, unknown> {
  return { [CONTEXT_KEY]: request };
}

function requestOf(context: unknown, toolName: string): HumanRequest {
  const request = (context as Record<string, unknown> | undefined)?.[CONTEXT_KEY];
  if (!(request instanceof HumanRequest)) throw new Error(`${toolName} works only inside an aiFlow of @channelkit/ai`);
  return request;
}

/**
 * A tool that hands the conversation over to a human (live chat): the model stops there,
 * the run ends `pending` with `livechat_waiting`, and the user's next messages go to the
 * agent. `message` is what the user is told (the model may write its own first).
 *
 * @example
 * aiFlow({ name: "support", model, tools: { handover: handoverTool({ message: "Connecting you to a person." }) } })
 */
export function handoverTool(options: { description?: string; message?: string } = {}): Tool<{ reason?: string | undefined }, { handedOver: true }> {
  return tool({
    description: options.description ?? "Hands the conversation over to a human agent. Use it when the user asks for a person, or when you cannot help.",
    inputSchema: z.object({ reason: z.string().optional().describe("Why a human is needed, for the agent who takes over") }),
    execute: async (_input, { experimental_context }) => {
      requestOf(experimental_context, "handoverTool").handover = { message: options.message };
      return { handedOver: true as const };
    },
  });
}

/**
 * A tool that asks the user a question and pauses the run (`pending`): the user's next
 * message resumes the conversation, with the question and its answer in the history.
 */
export function askUserTool(options: { description?: string } = {}): Tool<{ question: string }, { asked: true }> {
  return tool({
    description: options.description ?? "Asks the user a question and waits for the answer, when you need more information to go on.",
    inputSchema: z.object({ question: z.string().min(1).describe("The question, as the user will read it") }),
    execute: async ({ question }, { experimental_context }) => {
      requestOf(experimental_context, "askUserTool").question = question;
      return { asked: true as const };
    },
  });
}
