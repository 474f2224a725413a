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
    // The abort and a one-element array: about 140 bytes, where its Set made it 215.
    expect((process.memoryUsage().heapUsed - before) / count).toBeLessThan(175);
    expect(kept.length).toBe(count);
  });
});
