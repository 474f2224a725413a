import { describe, expect, it } from "vitest";
import { demoFlows } from "./flows/demo.js";
import { createChannelService } from "./service.js";
import { memoryStorage } from "./storage/memory.js";

describe("createChannelService's options", () => {
  it("refuses an option it does not have, naming it, as the command's config file does", async () => {
    const options = { storage: memoryStorage(), flows: demoFlows, secretKey: "ab".repeat(32), flow: "echo", turnLease: 5000 };
    await expect(createChannelService(options as Parameters<typeof createChannelService>[0])).rejects.toThrow(
      /^channelkit: unknown options "flow", "turnLease" of createChannelService \(its options: storage, flows, /,
    );
  });
});
