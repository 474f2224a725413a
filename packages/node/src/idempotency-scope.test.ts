import { type ChannelService, createChannelService } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { describeWithPostgres, postgresTestStore, sqliteTestStore, type TestStore } from "@channelkit/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, serve } from "./serve.js";

const APP = "https://app.example";

/**
 * An `Idempotency-Key` sent with a publishable key is the caller's own: every visitor's page
 * holds the same key, so a visitor who guesses another's `Idempotency-Key` and body must not
 * read that visitor's answer. The keys are scoped to the client address; a server key's are
 * the server's.
 */
function scopeTests(name: string, open: () => Promise<TestStore>) {
  describe(`Idempotency-Key with a publishable key: ${name}`, () => {
    let store: TestStore;
    let service: ChannelService;
    let server: RunningServer;
    let key: string;

    beforeAll(async () => {
      store = await open();
      service = await createChannelService({ storage: store.storage, flows: demoFlows, logger: { warn() {}, error() {} }, trustProxy: 1 });
      server = await serve(service, { port: 0 });
      const { tenant } = await service.admin.createTenant({ name: "visitors" });
      key = (await service.admin.createChannel({ tenantId: tenant.id, flow: "echo", mode: "public", allowedOrigins: [APP] })).api_key;
    });

    afterAll(async () => {
      await server?.close();
      await service?.close();
      await store?.dispose();
    });

    const execute = async (visitor: string, idempotencyKey: string) => {
      const response = await fetch(`${server.url}/public/v1/api/execute`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${key}`,
          "content-type": "application/json",
          origin: APP,
          "x-forwarded-for": visitor,
          "idempotency-key": idempotencyKey,
        },
        body: JSON.stringify({ payload: "my secret question", stream: false }),
      });
      expect(response.status).toBe(200);
      return (await response.json()) as { run_id: string; conversation_id: string };
    };

    it("a visitor's retry gets its first answer; another visitor with the same key and body gets a run of its own", async () => {
      const idempotencyKey = `guessable-${Math.random()}`;
      const first = await execute("198.51.100.7", idempotencyKey);
      const retry = await execute("198.51.100.7", idempotencyKey);
      expect(retry).toEqual(first);
      const other = await execute("198.51.100.8", idempotencyKey);
      expect(other.run_id).not.toBe(first.run_id);
      expect(other.conversation_id).not.toBe(first.conversation_id);
    });
  });
}

scopeTests("SQLite", sqliteTestStore);
describeWithPostgres("Postgres", (serverUrl) => scopeTests("Postgres", () => postgresTestStore(serverUrl)));
