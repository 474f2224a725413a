import { describe, expect, it } from "vitest";
import { assertChannelService } from "./assert-service.js";
import { demoFlows } from "./flows/demo.js";
import { createChannelService } from "./service.js";
import { memoryStorage } from "./storage/memory.js";
import type { Storage } from "./storage/types.js";

function recorder() {
  const warnings: string[] = [];
  const errors: string[] = [];
  return {
    warnings,
    errors,
    warn: (...args: unknown[]) => void warnings.push(args.map(String).join(" ")),
    error: (...args: unknown[]) => void errors.push(args.map(String).join(" ")),
  };
}

describe("the schema check at start-up", () => {
  it("the memory storage is always up to date", async () => {
    const storage = memoryStorage();
    expect(await storage.schemaStatus?.()).toEqual({ known: [], pending: [], unknown: [] });
    const logger = recorder();
    const service = await createChannelService({ storage, flows: demoFlows, logger, secretKey: "c".repeat(64) });
    expect(logger.warnings).toEqual([]);
    await service.close();
  });

  it("whatever the storage, a schema it reports behind is refused with how to migrate", async () => {
    const storage: Storage = { ...memoryStorage(), schemaStatus: async () => ({ known: ["0001_a", "0002_b"], pending: ["0002_b"], unknown: [] }) };
    await expect(createChannelService({ storage, flows: demoFlows, logger: recorder() })).rejects.toThrow(
      "channelkit: the database schema is behind: 1 of 2 migrations are not applied (0002_b): run `await storage.migrate()` before `createChannelService(...)`, or `npx channelkit migrate --db <the same database>`.",
    );
  });

  it("a storage without schemaStatus is not checked; channels it cannot list are logged, and the service starts", async () => {
    const { schemaStatus: _, ...rest } = memoryStorage();
    const storage: Storage = {
      ...rest,
      listChannels: async () => {
        throw new Error("no such table: channels");
      },
    };
    const logger = recorder();
    const service = await createChannelService({ storage, flows: demoFlows, logger, secretKey: "c".repeat(64) });
    expect(logger.errors).toEqual([expect.stringContaining("the channels could not be read at start-up (is the schema migrated? `await storage.migrate()`)")]);
    await service.close();
  });
});

describe("assertChannelService (what adapters call with what they were given)", () => {
  it("refuses the promise of createChannelService, saying to await it", async () => {
    const pending = createChannelService({ storage: memoryStorage(), flows: demoFlows, logger: recorder() });
    expect(() => assertChannelService(pending, "serve(service)")).toThrow(TypeError);
    expect(() => assertChannelService(pending, "serve(service)")).toThrow(
      "channelkit: serve(service) was given a Promise, not a channel service: createChannelService() is async. Pass what it resolves to: `const service = await createChannelService({ ... })`, then `serve(service)`.",
    );
    const service = await pending;
    expect(() => assertChannelService(service, "serve(service)", true)).not.toThrow();
    await service.close();
  });

  it("refuses what is not a service, saying what it was given", () => {
    expect(() => assertChannelService(undefined, "serve(service)")).toThrow(
      "serve(service) needs a channel service, `await createChannelService({ ... })`, but was given undefined.",
    );
    expect(() => assertChannelService(null, "serve(service)")).toThrow("but was given null.");
    expect(() => assertChannelService({}, "serve(service)")).toThrow("but was given an object without a handler() method.");
    expect(() => assertChannelService({ handler: async () => new Response() }, "channelkit(service)", true)).toThrow("but was given an object without routes.");
    expect(() => assertChannelService({ handler: async () => new Response() }, "toNodeHandler(service)")).not.toThrow();
  });
});
