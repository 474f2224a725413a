import type { Storage } from "@channelkit/core";

/** A call of a storage method held by a {@link StorageGate}. */
export interface HeldCall {
  /** Resolves with the call's arguments once the held method is called: the service is then stopped at that point. */
  readonly reached: Promise<unknown[]>;
  /** Lets the held call go on. */
  release(): void;
}

type AsyncMethod = Extract<
  {
    [K in keyof Storage]: Storage[K] extends (...args: never[]) => Promise<unknown> ? K : never;
  }[keyof Storage],
  string
>;

/**
 * Holds a service at a chosen point of a request: the next call of a storage method waits
 * until the test releases it, so that the test can act (a client leaving, say) while the
 * service is known to be there, rather than after a guessed delay.
 */
export class StorageGate {
  readonly #holds = new Map<PropertyKey, { reached: (args: unknown[]) => void; released: Promise<void> }>();

  /** Holds the next call of `method`, on any channel: tests that use the gate run one at a time. */
  hold(method: AsyncMethod): HeldCall {
    let reached!: (args: unknown[]) => void;
    let release!: () => void;
    const reachedPromise = new Promise<unknown[]>((resolve) => {
      reached = resolve;
    });
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    this.#holds.set(method, { reached, released });
    return { reached: reachedPromise, release };
  }

  /** The arguments of the next call of `method`, which is not held. */
  watch(method: AsyncMethod): Promise<unknown[]> {
    const call = this.hold(method);
    call.release();
    return call.reached;
  }

  /** `storage`, with every method call first passing the gate. */
  wrap(storage: Storage): Storage {
    const holds = this.#holds;
    return new Proxy(storage, {
      get(target, name) {
        const value: unknown = Reflect.get(target, name, target);
        if (typeof value !== "function") return value;
        return (...args: unknown[]) => {
          const hold = holds.get(name);
          if (!hold) return value.apply(target, args);
          holds.delete(name);
          hold.reached(args);
          return hold.released.then(() => value.apply(target, args));
        };
      },
    });
  }
}
