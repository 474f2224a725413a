import { createChannelService } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { memoryStorage } from "@channelkit/core";
import { afterEach, describe, expect, it, vi } from "vitest";
import { toNodeHandler } from "./handler.js";
import { type RunningServer, serve } from "./serve.js";

const quiet = { warn() {}, error() {} };
const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const item of open.splice(0).reverse()) await item.close();
});

async function service() {
  const created = await createChannelService({ storage: memoryStorage(), flows: demoFlows, logger: quiet });
  open.push(created);
  return created;
}

describe("serve()", () => {
  it("resolves to the URL it listens on (the port it got for port 0), which answers, and prints nothing", async () => {
    const log = vi.spyOn(console, "log");
    const info = vi.spyOn(console, "info");
    const running: RunningServer = await serve(await service(), { port: 0 });
    open.push(running);
    expect(running.url).toBe(`http://127.0.0.1:${running.port}`);
    expect(running.port).toBeGreaterThan(0);
    const answer = await fetch(`${running.url}/public/v1/api/execute`, { method: "POST" });
    expect(answer.status).toBe(401);
    expect(log).not.toHaveBeenCalled();
    expect(info).not.toHaveBeenCalled();
  });

  it("brackets an IPv6 host in its URL", async () => {
    const running = await serve(await service(), { port: 0, host: "::1" }).catch(() => null);
    // A machine without IPv6 loopback cannot bind it: nothing to check there.
    if (running === null) return;
    open.push(running);
    expect(running.url).toBe(`http://[::1]:${running.port}`);
  });

  it("refuses the promise of createChannelService (a forgotten await) with a TypeError saying what to pass, rather than answering 500s", async () => {
    const pending = createChannelService({ storage: memoryStorage(), flows: demoFlows, logger: quiet });
    // @ts-expect-error what a JavaScript caller can do
    expect(() => serve(pending, { port: 0 })).toThrow(TypeError);
    // @ts-expect-error what a JavaScript caller can do
    expect(() => serve(pending, { port: 0 })).toThrow("serve(service) was given a Promise, not a channel service: createChannelService() is async");
    // @ts-expect-error what a JavaScript caller can do
    expect(() => toNodeHandler(pending)).toThrow("toNodeHandler(service) was given a Promise");
    open.push(await pending);
  });
});
