import { createChannelService } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { postgres } from "@channelkit/kysely";
import { bunSqlite } from "@channelkit/kysely/bun-sqlite";

// channelkit on Bun: Bun.serve with the service's Web handler, on Bun's own SQLite
// (bun:sqlite), or on Postgres when CHANNELKIT_DB is a postgres:// URL.
declare const Bun: {
  serve(options: {
    hostname: string;
    port: number;
    idleTimeout?: number;
    fetch(request: Request, server: { requestIP(request: Request): { address: string } | null }): Promise<Response>;
  }): { port: number };
};

const db = process.env.CHANNELKIT_DB ?? "./channelkit.db";
const storage = /^postgres(ql)?:/.test(db) ? postgres(db) : bunSqlite(db);
await storage.migrate();
const service = await createChannelService({ storage, flows: demoFlows, secretKey: process.env.CHANNELKIT_SECRET_KEY });

const server = Bun.serve({
  hostname: process.env.HOST ?? "127.0.0.1",
  port: Number(process.env.PORT ?? 3000),
  idleTimeout: 0, // streams may be quiet longer than Bun's default 10 s
  fetch: (request, server) => service.handler(request, { clientAddress: server.requestIP(request)?.address }),
});
console.log(`listening on http://127.0.0.1:${server.port}`);
