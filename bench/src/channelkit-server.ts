/**
 * The measured server: channelkit as a user embeds it (createChannelService + openStorage +
 * serve from @channelkit/node) with the demo flows, in its own process.
 */
import { createChannelService } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { openStorage } from "@channelkit/kysely";
import { serve } from "@channelkit/node";
import { countLockWaits } from "./lock-waits.js";
import { BENCH_SECRET_KEY, listenToParent, serverConfig, toParent } from "./shared.js";

const config = serverConfig();
if (config.countLockWaits && config.store === "sqlite") countLockWaits();
const storage = openStorage(config.location);
await storage.migrate();
const service = await createChannelService({
  storage,
  flows: demoFlows,
  secretKey: BENCH_SECRET_KEY,
  logger: { warn: () => undefined, error: (message, ...details) => console.error(message, ...details) },
});
const server = await serve(service, { port: 0 });

listenToParent(async () => {
  await server.close();
  server.server.closeAllConnections();
  await service.close();
});
toParent({ type: "ready", port: server.port });
