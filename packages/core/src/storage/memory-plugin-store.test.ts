import { describe, expect, it } from "vitest";
import { memoryStorage } from "./memory.js";

// The memory store's plugin store behaves as every store's: the storage contract's "plugin
// store" group (memory.test.ts). Here, what is particular to it.

describe("the memory storage and plugins", () => {
  const withTables = {
    id: "acme-crm",
    schema: { migrations: { "0001_contacts": { up: async () => undefined } } },
  };

  it("migrates plugins without tables, and refuses one with migrations, saying where its data goes", async () => {
    const storage = memoryStorage();
    await storage.migrate({ plugins: [{ id: "plain" }, { id: "empty", schema: { migrations: {} } }] });
    expect(await storage.schemaStatus?.({ plugins: [{ id: "plain" }] })).toEqual({ known: [], pending: [], unknown: [] });
    const message = /the plugin "acme-crm" has migrations \(0001_contacts\), but the memory storage has no tables: use ctx\.storage\.pluginStore\(\.\.\.\)/;
    await expect(storage.migrate({ plugins: [{ id: "plain" }, withTables] })).rejects.toThrow(message);
    // So does the service's start-up check, rather than starting a plugin whose tables cannot exist.
    await expect(storage.schemaStatus?.({ plugins: [withTables] })).rejects.toThrow(message);
  });

  it("keeps a plugin's values in the storage: every pluginStore(id) of one storage shares them, another storage does not; closed, it fails", async () => {
    const storage = memoryStorage();
    await storage.pluginStore("p").set("k", { n: 1 });
    expect(await storage.pluginStore("p").get("k")).toEqual({ n: 1 });
    expect(await memoryStorage().pluginStore("p").get("k")).toBeUndefined();
    await storage.close();
    await expect(storage.pluginStore("p").get("k")).rejects.toThrow("the storage is closed");
  });
});
