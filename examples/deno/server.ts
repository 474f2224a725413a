import { createChannelService } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { postgres } from "@channelkit/kysely";
import { nodeSqlite } from "@channelkit/kysely/node-sqlite";

// channelkit on Deno: Deno.serve with the service's Web handler, on the SQLite of Deno's
// node:sqlite, or on Postgres when CHANNELKIT_DB is a postgres:// URL.
declare const Deno: {
  env: { get(name: string): string | undefined };
  serve(
    options: { hostname: string; port: number; onListen(address: { port: number }): void },
    handler: (request: Request, info: { remoteAddr: { hostname: string } }) => Promise<Response>,
  ): unknown;
};

const db = Deno.env.get("CHANNELKIT_DB") ?? "./channelkit.db";
const storage = /^postgres(ql)?:/.test(db) ? postgres(db) : nodeSqlite(db);
await storage.migrate();
const service = await createChannelService({ storage, flows: demoFlows, secretKey: Deno.env.get("CHANNELKIT_SECRET_KEY") });

Deno.serve(
  {
    hostname: Deno.env.get("HOST") ?? "127.0.0.1",
    port: Number(Deno.env.get("PORT") ?? 3000),
    onListen: ({ port }) => console.log(`listening on http://127.0.0.1:${port}`),
  },
  (request, info) => service.handler(request, { clientAddress: info.remoteAddr.hostname }),
);
