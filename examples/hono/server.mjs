// channelkit inside a Hono app, under /chat, served by @hono/node-server, on SQLite.
//   CHANNELKIT_DB   SQLite file or postgres:// URL (default ./channelkit.db), provisioned with
//                   the `channelkit` command
//   PORT, HOST      where to listen (default 3000 on 127.0.0.1)
import { serve } from "@hono/node-server";
import { createChannelService } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { channelkit } from "@channelkit/hono";
import { openStorage } from "@channelkit/kysely";
import { Hono } from "hono";

const storage = openStorage(process.env.CHANNELKIT_DB ?? "./channelkit.db");
await storage.migrate();
const service = await createChannelService({ storage, flows: demoFlows, secretKey: process.env.CHANNELKIT_SECRET_KEY });

const app = new Hono();
app.get("/health", (c) => c.json({ ok: true }));
app.post("/notes", async (c) => c.json({ note: await c.req.json() }, 201));
// The channel routes under /chat: POST /chat/public/v1/api/execute, ...
app.route("/chat", channelkit(service));

// The same `app.fetch` is what Bun (`export default app`), Deno (`Deno.serve(app.fetch)`) and
// Workers run, with a storage that works there.
const host = process.env.HOST ?? "127.0.0.1";
const server = serve({ fetch: app.fetch, port: Number(process.env.PORT ?? 3000), hostname: host }, (info) => {
  const shown = host.includes(":") ? `[${host}]` : host;
  console.log(`listening on http://${shown}:${info.port}`);
});

for (const signal of ["SIGINT", "SIGTERM"]) {
  process.once(signal, async () => {
    server.close();
    await service.close(); // cancels runs in flight, so open streams end
    process.exit(0);
  });
}
