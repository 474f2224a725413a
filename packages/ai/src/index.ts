/**
 * `@channelkit/ai`: AI SDK agents as channelkit flows. {@link aiFlow} runs a model with its
 * tools on the conversation's history; {@link fromUIMessageStream} takes any agent that
 * speaks the UI message stream; {@link handoverTool} and {@link askUserTool} let the model
 * hand over to a human or ask the user. See docs/ai.md.
 */
export { type AiFlowOptions, type AiFlowResult, aiFlow, DEFAULT_MAX_STEPS } from "./ai-flow.js";
export { modelFailure } from "./errors.js";
export { toModelMessages } from "./history.js";
export { askUserTool, handoverTool } from "./human.js";
export { flowEventsOf, fromUIMessageStream, type StepNames, type UIMessageStreamFlowOptions, type UIStreamSummary } from "./ui-stream-flow.js";
