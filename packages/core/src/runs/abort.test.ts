import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { RunAbort } from "./abort.js";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

describe("RunAbort", () => {
  it("calls each listener once, not one removed, and keeps the first reason", () => {
    const abort = new RunAbort();
    const calls: string[] = [];
    abort.onAbort(() => calls.push("a"));
    const remove = abort.onAbort(() => calls.push("b"));
    remove();
    expect(abort.aborted).toBe(false);
    abort.abort("first");
    abort.abort("second");
    expect(calls).toEqual(["a"]);
    expect(abort.aborted).toBe(true);
    expect(abort.reason).toBe("first");
  });

  it("defaults the reason to an AbortError", () => {
    const abort = new RunAbort();
    abort.abort();
    expect(abort.reason).toBeInstanceOf(DOMException);
    expect((abort.reason as DOMException).name).toBe("AbortError");
  });

  it("hands out a real AbortSignal that follows it, made before or after the abort", () => {
    const before = new RunAbort();
    const signal = before.signal;
    expect(signal).toBeInstanceOf(AbortSignal);
    expect(before.signal).toBe(signal);
    let heard: unknown;
    signal.addEventListener("abort", () => {
      heard = signal.reason;
    });
    before.abort("stop");
    expect(signal.aborted).toBe(true);
    expect(heard).toBe("stop");

    const after = new RunAbort();
    after.abort("late");
    expect(after.signal.aborted).toBe(true);
    expect(after.signal.reason).toBe("late");
  });

  it("keeps a lone listener without a Set (docs/benchmarks.md, Memory per open stream)", () => {
    const count = 10_000;
    const kept: RunAbort[] = new Array(count);
    const listener = () => undefined;
    gc();
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < count; i++) {
      kept[i] = new RunAbort();
      kept[i]?.onAbort(listener);
    }
    gc();
    gc();
    // The abort alone: about 60 bytes, where a one-element array made it 140 and a Set 215.
    expect((process.memoryUsage().heapUsed - before) / count).toBeLessThan(100);
    expect(kept.length).toBe(count);
  });

  it("keeps no grown array for a listener added and removed at each step of a run", () => {
    const count = 10_000;
    const kept: RunAbort[] = new Array(count);
    const listener = () => undefined;
    gc();
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < count; i++) {
      const abort = new RunAbort();
      for (let step = 0; step < 3; step++) {
        abort.listen(listener);
        abort.offAbort(listener);
      }
      abort.listen(listener);
      kept[i] = abort;
    }
    gc();
    gc();
    expect((process.memoryUsage().heapUsed - before) / count).toBeLessThan(100);
    expect(kept.length).toBe(count);
  });

  it("calls its listeners in the order they were added, the removed ones excepted, and listen() never at once", () => {
    const abort = new RunAbort();
    const calls: string[] = [];
    const a = () => calls.push("a");
    const b = () => calls.push("b");
    const c = () => calls.push("c");
    abort.listen(a);
    const removeB = abort.onAbort(b);
    abort.listen(c);
    abort.offAbort(a);
    abort.listen(a);
    removeB();
    abort.offAbort(() => undefined);
    abort.abort(new Error("stop"));
    expect(calls).toEqual(["c", "a"]);
    abort.listen(b);
    abort.abort();
    expect(calls).toEqual(["c", "a"]);
    abort.onAbort(b);
    expect(calls).toEqual(["c", "a", "b"]);
  });
});
