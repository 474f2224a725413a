import { createChannelService, memoryStorage } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import Fastify from "fastify";
import { describe, expect, it } from "vitest";
import { channelkit } from "./index.js";

describe("the Fastify plugin given the promise of createChannelService (a forgotten await)", () => {
  it("fails to register with a TypeError that says to await it", async () => {
    const pending = createChannelService({ storage: memoryStorage(), flows: demoFlows, logger: { warn() {}, error() {} } });
    const app = Fastify();
    // @ts-expect-error what a JavaScript caller can do
    const registered = app.register(channelkit, { service: pending, prefix: "/chat" });
    await expect(registered).rejects.toThrow(TypeError);
    await expect(app.ready()).rejects.toThrow("app.register(channelkit, { service }) was given a Promise, not a channel service");
    await app.close().catch(() => undefined);
    await (await pending).close();
  });
});
