import { createChannelService, memoryStorage } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import express from "express";
import { describe, expect, it } from "vitest";
import { channelkit, mountChannelkit } from "./index.js";

describe("the Express adapter given the promise of createChannelService (a forgotten await)", () => {
  it("throws a TypeError that says to await it, from channelkit() and mountChannelkit()", async () => {
    const pending = createChannelService({ storage: memoryStorage(), flows: demoFlows, logger: { warn() {}, error() {} } });
    // @ts-expect-error what a JavaScript caller can do
    expect(() => channelkit(pending)).toThrow(TypeError);
    // @ts-expect-error what a JavaScript caller can do
    expect(() => channelkit(pending)).toThrow("channelkit(service) was given a Promise, not a channel service: createChannelService() is async");
    // @ts-expect-error what a JavaScript caller can do
    expect(() => mountChannelkit(express(), pending)).toThrow("mountChannelkit(app, service) was given a Promise");
    await (await pending).close();
  });
});
