import { createChannelService, demoFlows, type Logger } from "@channelkit/core";
import type { KyselyStorage } from "@channelkit/kysely";
import type { ContractTarget } from "@channelkit/testkit";
import { serve } from "./serve.js";

/** A fixed test master key: signing secrets are sealed as in production. */
const SECRET_KEY = "4f".repeat(32);

/** The suite provokes failures on purpose; the answers, not the log, are what it checks. */
const quiet: Logger = { warn() {}, error() {} };

/** A fresh, empty store for one target, and how to dispose of it afterwards. */
export interface TestStore {
  storage: KyselyStorage;
  dispose(): Promise<void>;
}

/** The contract target of the node:http adapter on the stores `open` makes. */
export function nodeTarget(name: string, open: () => Promise<TestStore>): ContractTarget {
  return {
    name,
    async start(options) {
      const { storage, dispose } = await open();
      await storage.migrate();
      const service = await createChannelService({
        storage,
        flows: demoFlows,
        secretKey: SECRET_KEY,
        logger: quiet,
        ...(options.maxBodyBytes === undefined ? {} : { maxBodyBytes: options.maxBodyBytes }),
      });
      const server = await serve(service, { port: 0 });
      return {
        url: server.url,
        admin: service.admin,
        storage,
        async expireApiKeys(channelId) {
          // The admin API cannot set an expiry; the Kysely storage exposes its database.
          const past = new Date(Date.now() - 60_000).toISOString();
          await storage.db.updateTable("api_keys").set({ expires_at: past }).where("channel_id", "=", channelId).execute();
        },
        async close() {
          await server.close();
          await service.close();
          await dispose();
        },
      };
    },
  };
}
