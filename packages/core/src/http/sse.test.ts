import { afterEach, describe, expect, it, vi } from "vitest";
import { PushStream } from "./sse.js";

describe("PushStream", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("sends a comment after 15 s of silence, not while events flow, and none once ended; one timer serves every stream", async () => {
    vi.useFakeTimers();
    const idle = new PushStream(() => undefined);
    const busy = new PushStream(() => undefined);
    const closed = new PushStream(() => undefined);
    closed.end();
    expect(vi.getTimerCount()).toBe(1);

    vi.advanceTimersByTime(10_000);
    busy.push("data: 1\n\n");
    expect(await busy.pull()).toBe("data: 1\n\n");
    vi.advanceTimersByTime(5_000);
    // 15 s in: the idle stream gets a comment; the busy one sent an event 5 s ago.
    expect(await idle.pull()).toBe(": keep-alive\n\n");
    let busyNext: unknown = "nothing yet";
    void Promise.resolve(busy.pull()).then((chunk) => {
      busyNext = chunk;
    });
    await Promise.resolve();
    expect(busyNext).toBe("nothing yet");
    vi.advanceTimersByTime(15_000);
    await Promise.resolve();
    expect(busyNext).toBe(": keep-alive\n\n");
    expect(closed.pull()).toBeNull();

    idle.end();
    busy.end();
    // With no stream open, the timer stops at its next tick.
    vi.advanceTimersByTime(15_000);
    expect(vi.getTimerCount()).toBe(0);
  });
});
