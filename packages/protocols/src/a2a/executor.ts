import { type Artifact, type Message, Role, TaskState } from "@a2a-js/sdk";
import { AgentEvent, type AgentExecutor, type ExecutionEventBus, type RequestContext } from "@a2a-js/sdk/server";
import { type ChannelRecord, channelFlow, isServiceError, type RunOutcome, type ServiceContext, type StartedRun } from "@channelkit/core";

/** The runs in flight on this instance, by task id: what `CancelTask` stops. */
export type RunningTasks = Map<string, StartedRun>;

/** The metadata key of a status that handed the conversation over to live chat: its mode. */
export const LIVECHAT_MODE_KEY = "channelkit_livechat_mode";

/**
 * The SDK's `AgentExecutor` for one channel: a message is a run of the channel's flow in
 * the conversation of its `contextId` (the conversation whose external key it is, created by
 * its first message), published as the task's events. Its text streams as updates of one
 * artifact `reply` (each delta appended, then the whole reply once it ends), and the run's
 * end is the task's state: success `completed`, a paused flow `input-required` (its question
 * the status message), a handover `input-required` with the live chat mode in the status's
 * metadata, an error `failed`, a cancel `canceled`.
 */
export class FlowExecutor implements AgentExecutor {
  readonly #ctx: ServiceContext;
  readonly #channel: ChannelRecord;
  readonly #running: RunningTasks;

  constructor(ctx: ServiceContext, channel: ChannelRecord, running: RunningTasks) {
    this.#ctx = ctx;
    this.#channel = channel;
    this.#running = running;
  }

  async execute(request: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const { taskId, contextId } = request;
    const ids = { taskId, contextId };
    let run: StartedRun;
    try {
      run = await this.#ctx.runs.start({
        channel: this.#channel,
        flow: channelFlow(this.#ctx, this.#channel),
        // Any contextId a client makes is a conversation: its first message creates it.
        conversation: { externalKey: contextId },
        payload: textOf(request.userMessage),
        metadata: { a2a_task_id: taskId, a2a_context_id: contextId },
        // A task outlives its connection (GetTask, SubscribeToTask): only CancelTask stops it.
        request: null,
        live: true,
        // CancelTask may come to any instance.
        stoppable: true,
      });
    } catch (error) {
      if (!isServiceError(error)) throw error;
      bus.publish(AgentEvent.task(newTask(ids, {})));
      bus.publish(status(ids, TaskState.TASK_STATE_FAILED, `${error.code}: ${error.message}`));
      return;
    }
    this.#running.set(taskId, run);
    try {
      // The first event is the task (the SDK merges it with a task it continues).
      bus.publish(AgentEvent.task(newTask(ids, { channelkit_run_id: run.runId, channelkit_conversation_id: run.conversationId })));
      bus.publish(status(ids, TaskState.TASK_STATE_WORKING, null));
      const artifactId = `reply-${run.runId}`;
      let parts = 0;
      let first = true;
      let next = await run.steps.next();
      while (!next.done) {
        const part = next.value;
        const delta = part.type === "text-start" && parts++ > 0 ? "\n\n" : part.type === "text-delta" ? part.delta : "";
        if (delta !== "") {
          bus.publish(AgentEvent.artifactUpdate({ ...ids, artifact: artifact(artifactId, delta), append: !first, lastChunk: false, metadata: {} }));
          first = false;
        }
        next = await run.steps.next();
      }
      this.#finish(ids, artifactId, next.value, bus);
    } finally {
      this.#running.delete(taskId);
    }
  }

  /**
   * Stops the task's run when it runs here; its end publishes `canceled`. A run that ended as
   * the cancel came published its end already: the SDK then answers that the task is not
   * cancelable.
   */
  cancelTask(taskId: string, _bus: ExecutionEventBus): Promise<void> {
    this.#running.get(taskId)?.cancel(new DOMException("The task was cancelled (CancelTask).", "AbortError"));
    return Promise.resolve();
  }

  /** The run's end: its whole reply as the artifact, and its state with the reply (or error) as the status message. */
  #finish(ids: TaskIds, artifactId: string, outcome: RunOutcome, bus: ExecutionEventBus): void {
    const reply = outcome.produced
      .filter((message) => message.role === "assistant" && message.content !== "")
      .map((message) => message.content)
      .join("\n\n");
    if (reply !== "") bus.publish(AgentEvent.artifactUpdate({ ...ids, artifact: artifact(artifactId, reply), append: false, lastChunk: true, metadata: {} }));
    if (outcome.livechatMode !== null) {
      bus.publish(status(ids, TaskState.TASK_STATE_INPUT_REQUIRED, reply, { [LIVECHAT_MODE_KEY]: outcome.livechatMode }));
    } else if (outcome.status === "error") {
      bus.publish(status(ids, TaskState.TASK_STATE_FAILED, `flow_error: ${outcome.error ?? "The flow failed."}`));
    } else {
      bus.publish(status(ids, STATES[outcome.status], reply));
    }
  }
}

/** The task's state at the end of a run that did not fail, nor hand over. */
const STATES = {
  success: TaskState.TASK_STATE_COMPLETED,
  pending: TaskState.TASK_STATE_INPUT_REQUIRED,
  cancelled: TaskState.TASK_STATE_CANCELED,
} as const;

interface TaskIds {
  taskId: string;
  contextId: string;
}

/** The text of a message: its text parts, joined by newlines. */
function textOf(message: Message): string {
  return message.parts.flatMap((part) => (part.content?.$case === "text" ? [part.content.value] : [])).join("\n");
}

function newTask(ids: TaskIds, metadata: Record<string, unknown>) {
  const timestamp = new Date().toISOString();
  return {
    id: ids.taskId,
    contextId: ids.contextId,
    status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp },
    artifacts: [],
    history: [],
    metadata,
  };
}

function textPart(text: string) {
  return { content: { $case: "text" as const, value: text }, metadata: {}, filename: "", mediaType: "text/plain" };
}

function artifact(artifactId: string, text: string): Artifact {
  return { artifactId, name: "reply", description: "The agent's reply.", parts: [textPart(text)], metadata: {}, extensions: [] };
}

/** A status update; `text` becomes the status's agent message (none when null or empty). */
function status(ids: TaskIds, state: TaskState, text: string | null, metadata: Record<string, unknown> = {}) {
  const message: Message | undefined =
    text === null || text === ""
      ? undefined
      : { messageId: crypto.randomUUID(), ...ids, role: Role.ROLE_AGENT, parts: [textPart(text)], metadata: {}, extensions: [], referenceTaskIds: [] };
  return AgentEvent.statusUpdate({ ...ids, status: { state, message, timestamp: new Date().toISOString() }, metadata });
}
