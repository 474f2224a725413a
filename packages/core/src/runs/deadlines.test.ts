import { afterEach, describe, expect, it, vi } from "vitest";
import { RunAbort } from "./abort.js";
import { RunDeadlines, RunTimedOut } from "./deadlines.js";

afterEach(() => {
  vi.useRealTimers();
});

describe("RunDeadlines", () => {
  it("aborts each run when its limit passes, in the order they started, with one timer per limit", () => {
    vi.useFakeTimers();
    const deadlines = new RunDeadlines();
    const first = new RunAbort();
    deadlines.start(first, 2);
    vi.advanceTimersByTime(500);
    const second = new RunAbort();
    deadlines.start(second, 2);
    const other = new RunAbort();
    deadlines.start(other, 5);
    // Two limits in use: two timers, whatever the number of runs.
    expect(vi.getTimerCount()).toBe(2);

    vi.advanceTimersByTime(1499);
    expect(first.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(first.aborted).toBe(true);
    expect(first.reason).toBeInstanceOf(RunTimedOut);
    expect((first.reason as Error).message).toBe("The flow ran longer than the channel's limit of 2 s and was stopped.");
    expect(second.aborted).toBe(false);
    vi.advanceTimersByTime(500);
    expect(second.aborted).toBe(true);
    expect(other.aborted).toBe(false);
    vi.advanceTimersByTime(2999);
    expect(other.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(other.reason).toBeInstanceOf(RunTimedOut);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("leaves a run that ended alone, and stops the timer once no run is left", () => {
    vi.useFakeTimers();
    const deadlines = new RunDeadlines();
    const ended = new RunAbort();
    const running = new RunAbort();
    deadlines.start(ended, 1);
    deadlines.start(running, 1);
    deadlines.end(ended, 1);
    vi.advanceTimersByTime(1000);
    expect(ended.aborted).toBe(false);
    expect(running.aborted).toBe(true);

    const alone = new RunAbort();
    deadlines.start(alone, 3);
    deadlines.end(alone, 3);
    expect(vi.getTimerCount()).toBe(0);
    // Ending a run twice, or one never started, changes nothing.
    deadlines.end(alone, 3);
    deadlines.end(new RunAbort(), 7);
  });

  it("close() stops every timer", () => {
    vi.useFakeTimers();
    const deadlines = new RunDeadlines();
    const run = new RunAbort();
    deadlines.start(run, 1);
    deadlines.close();
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(2000);
    expect(run.aborted).toBe(false);
  });
});
