// channelkit on plain node:http, with embedded SQLite.
//   CHANNELKIT_DB   SQLite file (default ./channelkit.db), provisioned with the `channelkit` command
//   PORT, HOST      where to listen (default 3000 on 127.0.0.1)
import { createChannelService } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { openStorage } from "@channelkit/kysely";
import { serve } from "@channelkit/node";

const storage = openStorage(process.env.CHANNELKIT_DB ?? "./channelkit.db");
await storage.migrate();
const service = await createChannelService({ storage, flows: demoFlows, secretKey: process.env.CHANNELKIT_SECRET_KEY });

const server = await serve(service, { port: Number(process.env.PORT ?? 3000), host: process.env.HOST ?? "127.0.0.1" });
console.log(`listening on ${server.url}`);

for (const signal of ["SIGINT", "SIGTERM"]) {
  process.once(signal, async () => {
    const closed = server.close();
    await service.close(); // cancels runs in flight, so open streams end
    await closed;
    process.exit(0);
  });
}
