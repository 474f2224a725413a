import { describe, expect, it } from "vitest";
import { demoFlows } from "./flows/demo.js";
import type { ChannelPlugin } from "./plugins.js";
import { createChannelService } from "./service.js";
import { memoryStorage } from "./storage/memory.js";

const quiet = { warn() {}, error() {} };

describe("service.routes", () => {
  it("lists every route the handler answers, plugins' included, under the basePath", async () => {
    const plugin: ChannelPlugin = { name: "ping", routes: [{ method: "get", path: "/ping", handle: () => new Response("pong") }] };
    const service = await createChannelService({ storage: memoryStorage(), flows: demoFlows, logger: quiet, basePath: "/chat/", plugins: [plugin] });
    try {
      expect(service.routes).toEqual([
        { method: "OPTIONS", path: "/chat/public/v1/api/execute" },
        { method: "POST", path: "/chat/public/v1/api/execute" },
        { method: "OPTIONS", path: "/chat/public/v1/api/conversations/:session_id/messages" },
        { method: "GET", path: "/chat/public/v1/api/conversations/:session_id/messages" },
        { method: "GET", path: "/chat/ping" },
      ]);
      expect(Object.isFrozen(service.routes)).toBe(true);
      const answered = await service.handler(new Request("http://host.test/chat/ping"));
      expect(await answered.text()).toBe("pong");
    } finally {
      await service.close();
    }
  });
});
