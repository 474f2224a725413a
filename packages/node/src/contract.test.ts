import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createChannelService, demoFlows, type Logger } from "@channelkit/core";
import { sqlite } from "@channelkit/kysely";
import { serve } from "@channelkit/node";
import { defineContractSuite } from "@channelkit/testkit";

/** A fixed test master key: signing secrets are sealed as in production. */
const SECRET_KEY = "4f".repeat(32);

/** The suite provokes failures on purpose; the answers, not the log, are what it checks. */
const quiet: Logger = { warn() {}, error() {} };

defineContractSuite({
  name: "node:http + SQLite",
  async start(options) {
    const dir = await mkdtemp(join(tmpdir(), "channelkit-contract-"));
    const storage = sqlite(join(dir, "contract.db"));
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
        await rm(dir, { recursive: true, force: true });
      },
    };
  },
});
