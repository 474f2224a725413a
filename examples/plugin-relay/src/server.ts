/**
 * A channelkit server with the relay plugin: what the two-process test starts twice on one
 * database. Bundle it (or run it with a TypeScript loader) and start it with:
 *   CHANNELKIT_DB          a SQLite file or a postgres:// URL (default ./relay.db)
 *   CHANNELKIT_SECRET_KEY  the master key that seals the channels' tokens
 *   PORT, HOST             where to listen (default 3000 on 127.0.0.1)
 */
import { createChannelService } from "@channelkit/core";
import { openStorage } from "@channelkit/kysely";
import { serve } from "@channelkit/node";
import { relayChannel } from "./index.js";
import { replyFlow } from "./reply-flow.js";

async function main(): Promise<void> {
  const plugins = [relayChannel()];
  const storage = openStorage(process.env.CHANNELKIT_DB ?? "./relay.db");
  // channelkit's tables, then the plugin's.
  await storage.migrate({ plugins });
  const service = await createChannelService({ storage, flows: [replyFlow], plugins, secretKey: process.env.CHANNELKIT_SECRET_KEY });
  const server = await serve(service, { port: Number(process.env.PORT ?? 3000), host: process.env.HOST ?? "127.0.0.1" });
  console.log(`listening on ${server.url}`);

  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, async () => {
      const closed = server.close();
      // Waits for the runs in flight, and for the replies their hooks are posting.
      await service.close();
      await closed;
      process.exit(0);
    });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
