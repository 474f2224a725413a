import { AsyncLocalStorage } from "node:async_hooks";
import type { PluginStore } from "@channelkit/core";

/**
 * The keys one delivery claimed in the Chat SDK's state to answer a platform's retries once
 * (Telegram's `update_id`, each message's id, ...), and the messages it answered.
 *
 * A delivery whose message could not be run must not leave its claims behind: the
 * platform's retry would be taken for a duplicate and the message lost. Its route gives the
 * claims back and answers 503, so the platform sends the delivery again; the messages of
 * the same delivery that were answered keep theirs and are not answered twice.
 *
 * The Chat SDK claims a message under `dedupe:{adapter}:{message id}`; knowing that format
 * is what lets an answered message keep its claim. Were it to change, a retried delivery
 * would answer its answered messages again: a duplicate, never a loss.
 */
export class DeliveryClaims {
  readonly #claimed: string[] = [];
  /** The SDK's name of each claim, to its store key. */
  readonly #names = new Map<string, string>();
  readonly #answered = new Set<string>();

  /** Runs a delivery: the claims made and the messages answered under `deliver` are this delivery's. */
  run<T>(deliver: () => Promise<T>): Promise<T> {
    return current.run(this, deliver);
  }

  /** Gives back every claim but those of the messages answered. */
  async release(store: PluginStore): Promise<void> {
    await Promise.all(this.#claimed.filter((key) => !this.#answered.has(key)).map((key) => store.delete(key)));
  }

  /** @internal A claim made in the store under `key` (the store's own key) for the SDK's `name`. */
  claimed(key: string, name: string): void {
    this.#claimed.push(key);
    this.#names.set(name, key);
  }

  /** @internal A message whose run took its turn. */
  answered(adapter: string, messageId: string): void {
    const key = this.#names.get(`dedupe:${adapter}:${messageId}`);
    if (key !== undefined) this.#answered.add(key);
  }
}

const current = new AsyncLocalStorage<DeliveryClaims>();

/** The claims of the delivery being run, if any (an agent's message posted from a hook has none). */
export function currentClaims(): DeliveryClaims | undefined {
  return current.getStore();
}
