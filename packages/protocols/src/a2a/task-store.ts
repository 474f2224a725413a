import { type ListTasksRequest, type ListTasksResponse, Task } from "@a2a-js/sdk";
import { UnsupportedOperationError } from "@a2a-js/sdk/errors";
import type { TaskStore } from "@a2a-js/sdk/server";
import type { PluginStore } from "@channelkit/core";

/** How long a task stays readable with `GetTask` after its last change: 30 days. */
export const TASK_TTL_MS = 30 * 24 * 60 * 60 * 1000;

/**
 * The SDK's `TaskStore` on the plugin's key-value store, shared by every instance on the
 * database: `GetTask` answers on any instance, whichever ran the task. One store per channel:
 * its keys carry the channel's id, so that a key reads only its own channel's tasks. Tasks
 * are kept in the protocol's JSON (`Task.toJSON`), which reads back as the SDK's objects.
 */
export class PluginTaskStore implements TaskStore {
  readonly #store: PluginStore;
  readonly #channelId: string;

  constructor(store: PluginStore, channelId: string) {
    this.#store = store;
    this.#channelId = channelId;
  }

  async save(task: Task): Promise<void> {
    await this.#store.set(this.#key(task.id), Task.toJSON(task), { ttlMs: TASK_TTL_MS });
  }

  async load(taskId: string): Promise<Task | undefined> {
    const stored = await this.#store.get<Record<string, unknown>>(this.#key(taskId));
    return stored === undefined ? undefined : Task.fromJSON(stored);
  }

  /** A key-value store lists nothing: `ListTasks` is not offered (the conversation's history is). */
  list(_params: ListTasksRequest): Promise<ListTasksResponse> {
    return Promise.reject(new UnsupportedOperationError("ListTasks is not offered: read the conversation's history instead."));
  }

  #key(taskId: string): string {
    return `task:${this.#channelId}:${taskId}`;
  }
}
