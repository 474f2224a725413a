import { describe, expect, it } from "vitest";
import { demoFlows } from "../flows/demo.js";
import { createChannelService } from "../service.js";
import { memoryStorage } from "../storage/memory.js";
import type { IdempotencyStore, Storage } from "../storage/types.js";

/** The calls made to a store, by method, and the store (failing on `fail`'s methods). */
function watchedStore(inner: IdempotencyStore, fail: Partial<Record<keyof IdempotencyStore, Error>> = {}) {
  const calls: string[] = [];
  const store = Object.fromEntries(
    (["claim", "renew", "complete", "release", "prune"] as const).map((name) => [
      name,
      async (...args: unknown[]) => {
        calls.push(name);
        const failure = fail[name];
        if (failure) throw failure;
        return (inner[name] as (...a: unknown[]) => Promise<unknown>)(...args);
      },
    ]),
  ) as unknown as IdempotencyStore;
  return { store, calls };
}

/** A service on the memory storage, its idempotency store replaced by `store` (or none), and a channel of `flow`. */
async function serviceWith(store: IdempotencyStore | undefined, flow = "echo", options: { turnLeaseMs?: number } = {}) {
  const inner = memoryStorage();
  await inner.migrate();
  const storage: Storage = { ...inner, idempotency: store };
  const logged: string[] = [];
  const logger = { warn: (message: string) => logged.push(`warn: ${message}`), error: (message: string) => logged.push(`error: ${message}`) };
  const service = await createChannelService({ storage, flows: demoFlows, logger, ...options });
  const tenantId = (await service.admin.createTenant({ name: "Idempotency" })).tenant.id;
  const { api_key: key } = await service.admin.createChannel({ tenantId, flow });
  const execute = (body: unknown, idempotencyKey?: string) =>
    service.handler(
      new Request("http://host.test/public/v1/api/execute", {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...(idempotencyKey ? { "idempotency-key": idempotencyKey } : {}) },
        body: JSON.stringify(body),
      }),
    );
  return { service, execute, logged, storage: inner };
}

describe("idempotency", () => {
  it("a request without the header sends the store nothing", async () => {
    const { store, calls } = watchedStore(memoryStorage().idempotency as IdempotencyStore);
    const { service, execute } = await serviceWith(store);
    try {
      for (const stream of [false, true]) {
        const response = await execute({ payload: "plain", stream });
        expect(response.status).toBe(200);
        await response.text();
      }
      expect(calls).toEqual([]);
      const keyed = await execute({ payload: "keyed", stream: false }, "k-1");
      await keyed.text();
      // The claim, the deletion of expired keys (the instance's first keyed request), the answer.
      expect(calls.sort()).toEqual(["claim", "complete", "prune"]);
    } finally {
      await service.close();
    }
  });

  it("without storage.idempotency, keys are kept in the process's memory, with one warning", async () => {
    const { service, execute, logged } = await serviceWith(undefined);
    try {
      const first = await (await execute({ payload: "once", stream: false }, "k-1")).text();
      const again = await execute({ payload: "once", stream: false }, "k-1");
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      expect(await again.text()).toBe(first);
      await (await execute({ payload: "twice", stream: false }, "k-2")).text();
      expect(logged.filter((line) => line.includes("storage.idempotency"))).toHaveLength(1);
    } finally {
      await service.close();
    }
  });

  it("a claim that fails is a 500 and runs nothing; an answer that cannot be stored is still answered, and logged", async () => {
    const claimFails = watchedStore(memoryStorage().idempotency as IdempotencyStore, { claim: new Error("database down") });
    const failing = await serviceWith(claimFails.store);
    try {
      const refused = await failing.execute({ payload: "x", stream: false }, "k-1");
      expect(refused.status).toBe(500);
      // Refused at the claim, before the run began.
      expect(claimFails.calls).toEqual(["claim"]);
      expect(failing.logged.some((line) => line.startsWith("error: "))).toBe(true);
    } finally {
      await failing.service.close();
    }

    const completeFails = watchedStore(memoryStorage().idempotency as IdempotencyStore, { complete: new Error("database down") });
    const { service, execute, logged } = await serviceWith(completeFails.store);
    try {
      const answered = await execute({ payload: "x", stream: false }, "k-1");
      expect(answered.status).toBe(200);
      expect(await answered.json()).toMatchObject({ status: "success" });
      expect(logged.some((line) => line.startsWith("error: ") && line.includes("could not be stored"))).toBe(true);
      // Held until its lease lapses: in use meanwhile.
      expect((await execute({ payload: "x", stream: false }, "k-1")).status).toBe(409);
    } finally {
      await service.close();
    }
  });

  it("a keyed request running longer than a third of the lease renews its key, until its answer is stored", async () => {
    const { store, calls } = watchedStore(memoryStorage().idempotency as IdempotencyStore);
    const { service, execute } = await serviceWith(store, "slow", { turnLeaseMs: 600 });
    try {
      const answered = await execute({ payload: "long", stream: false }, "k-1");
      expect(await answered.json()).toMatchObject({ status: "success" });
      const renewals = calls.filter((call) => call === "renew").length;
      // 5 s of run, a renewal every 200 ms.
      expect(renewals).toBeGreaterThanOrEqual(10);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(calls.filter((call) => call === "renew")).toHaveLength(renewals);
    } finally {
      await service.close();
    }
  }, 15_000);

  it("close() waits for a keyed request's key to be settled, after its client left", async () => {
    const inner = memoryStorage().idempotency as IdempotencyStore;
    const settled: string[] = [];
    const slow: IdempotencyStore = {
      ...inner,
      async release(...args) {
        await new Promise((resolve) => setTimeout(resolve, 300));
        await inner.release(...args);
        settled.push("release");
      },
    };
    const { service, execute } = await serviceWith(slow, "slow");
    const response = await execute({ payload: "leave", stream: true }, "k-1");
    const reader = response.body?.getReader();
    await reader?.read();
    await reader?.cancel();
    await service.close();
    expect(settled).toEqual(["release"]);
  });
});
