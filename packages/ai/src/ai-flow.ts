import { defineFlow, type Flow, type FlowEvent, handover, pause, step } from "@channelkit/core";
import { APICallError, type CallSettings, type LanguageModel, type StopCondition, stepCountIs, streamText, type TelemetrySettings, type ToolSet } from "ai";
import { errorText, modelFailure, underlying } from "./errors.js";
import { toModelMessages } from "./history.js";
import { HumanRequest, toolContext } from "./human.js";
import { flowEventsOf, type StepNames } from "./ui-stream-flow.js";

/** The provider options `streamText` takes (keyed by provider name). */
type ProviderOptions = NonNullable<Parameters<typeof streamText>[0]["providerOptions"]>;

/** How many model calls a run makes at most when `stopWhen` is not given: enough for a few rounds of tools. */
export const DEFAULT_MAX_STEPS = 10;

/** What {@link aiFlow} takes. */
export interface AiFlowOptions<TOOLS extends ToolSet = ToolSet> extends StepNames {
  /** The name channels bind to. */
  name: string;
  id?: string;
  version?: string | null;
  /** Any AI SDK language model: `openai("gpt-4.1-mini")`, `anthropic(...)`, a gateway id string. */
  model: LanguageModel;
  /** The system prompt. */
  system?: string;
  /** The tools the model may call; their calls and results are stored in the history. */
  tools?: TOOLS;
  /**
   * When the loop of model calls and tools stops: by default after the model answers in
   * text, or after {@link DEFAULT_MAX_STEPS} calls. A tool that hands over or asks the user
   * always stops it.
   */
  stopWhen?: StopCondition<TOOLS> | StopCondition<TOOLS>[];
  /** How many of the conversation's last messages are read (default 50). */
  historyLimit?: number;
  /**
   * Estimated tokens of history sent to the model at most (default 8000; characters / 4):
   * the most recent messages that fit, a tool call and its result kept together.
   */
  historyTokens?: number;
  /** Provider options passed to `streamText`. */
  providerOptions?: ProviderOptions;
  /** Call settings passed to `streamText`: `temperature`, `maxOutputTokens`, `maxRetries`, `headers`... */
  settings?: Omit<CallSettings, "abortSignal">;
  /**
   * The AI SDK's telemetry (`experimental_telemetry` of `streamText`): `{ isEnabled: true }`
   * records its spans (`ai.streamText`, each model call, each tool call) under the run's own
   * span, in the host's OpenTelemetry SDK. Off by default, as in the AI SDK; with it on, the
   * AI SDK records prompts and answers unless `recordInputs` / `recordOutputs` are `false`.
   */
  telemetry?: TelemetrySettings;
}

/** A run's `result` for an {@link aiFlow}. */
export interface AiFlowResult {
  /** Why the model stopped (`stop`, `tool-calls`, `length`...). */
  finishReason: string | null;
  /** How many model calls the run made. */
  steps: number;
  /** Tokens used across the run's model calls, as the provider reported them. */
  usage: { inputTokens: number | null; outputTokens: number | null; totalTokens: number | null };
}

/**
 * An AI SDK model, with its tools, as a flow: `streamText` on the conversation's history
 * (token-bounded, tool calls and results included) and the user's message, looping through
 * tool calls until the model answers in text. The reply streams; each model call is a step
 * of node type `llm` and each tool execution a step of node type `tool`; the calls land on
 * the assistant message as `tool_calls`, the results as `role: "tool"` messages. The run's
 * signal aborts the model call. A provider error ends the run as a flow error with a
 * readable message (the provider's own text, which may quote the prompt or a key, is not
 * used). The run's result is an {@link AiFlowResult} (usage in tokens).
 *
 * @example
 * import { openai } from "@ai-sdk/openai";
 * const support = aiFlow({ name: "support", model: openai("gpt-4.1-mini"), system: "You help with orders.", tools: { lookupOrder } });
 */
export function aiFlow<TOOLS extends ToolSet = ToolSet>(options: AiFlowOptions<TOOLS>): Flow {
  const historyLimit = options.historyLimit ?? 50;
  const historyTokens = options.historyTokens ?? 8000;
  const stopWhen = options.stopWhen ?? stepCountIs(DEFAULT_MAX_STEPS);
  return defineFlow({
    name: options.name,
    ...(options.id === undefined ? {} : { id: options.id }),
    ...(options.version === undefined ? {} : { version: options.version }),
    async *run(ctx): AsyncGenerator<FlowEvent, AiFlowResult, void> {
      const human = new HumanRequest();
      const history = toModelMessages(await ctx.history(historyLimit), historyTokens);
      let failure: unknown;
      const result = streamText({
        ...options.settings,
        model: options.model,
        ...(options.system === undefined ? {} : { system: options.system }),
        ...(options.tools === undefined ? {} : { tools: options.tools }),
        ...(options.providerOptions === undefined ? {} : { providerOptions: options.providerOptions }),
        messages: [...history, { role: "user", content: ctx.payload }],
        stopWhen: [...[stopWhen].flat(), () => human.asked],
        abortSignal: ctx.signal,
        experimental_context: toolContext(human),
        ...(options.telemetry === undefined ? {} : { experimental_telemetry: options.telemetry }),
        // Failures reach the flow through the stream's error part; nothing is logged here.
        onError: ({ error }) => {
          failure = error;
        },
      });
      const stream = result.toUIMessageStream({
        sendReasoning: false,
        // A tool's error is the host's own words, given back to the model and stored with
        // the call; a failure of the model call gets a message of ours.
        onError: (error) => (error === failure || APICallError.isInstance(underlying(error)) ? modelFailure(error) : errorText(error)),
      });
      const summary = yield* flowEventsOf(stream, options);
      // The handover's message is the live chat's, not the tool's: a step of its own, as core's handover flow has.
      if (human.handover) {
        yield step("livechat", "livechat");
        yield handover(human.handover.message);
      } else if (human.question !== null) yield pause(human.question);
      const usage = await result.totalUsage;
      return {
        finishReason: summary.finishReason,
        steps: summary.steps,
        usage: { inputTokens: usage.inputTokens ?? null, outputTokens: usage.outputTokens ?? null, totalTokens: usage.totalTokens ?? null },
      };
    },
  });
}
