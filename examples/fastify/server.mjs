// channelkit as a Fastify 5 plugin, under /chat, on SQLite.
//   CHANNELKIT_DB   SQLite file or postgres:// URL (default ./channelkit.db), provisioned with
//                   the `channelkit` command
//   PORT, HOST      where to listen (default 3000 on 127.0.0.1)
import { createChannelService } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { channelkit } from "@channelkit/fastify";
import { openStorage } from "@channelkit/kysely";
import Fastify from "fastify";

const storage = openStorage(process.env.CHANNELKIT_DB ?? "./channelkit.db");
await storage.migrate();
const service = await createChannelService({ storage, flows: demoFlows, secretKey: process.env.CHANNELKIT_SECRET_KEY });

const app = Fastify();
app.get("/health", async () => ({ ok: true }));
app.post("/notes", async (request, reply) => reply.status(201).send({ note: request.body }));
// The channel routes under /chat: POST /chat/public/v1/api/execute, ... The plugin keeps the
// raw body for them; the host's JSON parser still serves /notes.
await app.register(channelkit, { service, prefix: "/chat" });

const host = process.env.HOST ?? "127.0.0.1";
await app.listen({ port: Number(process.env.PORT ?? 3000), host });
const shown = host.includes(":") ? `[${host}]` : host;
console.log(`listening on http://${shown}:${app.server.address().port}`);

for (const signal of ["SIGINT", "SIGTERM"]) {
  process.once(signal, async () => {
    const closed = app.close();
    await service.close(); // cancels runs in flight, so open streams end
    await closed;
    process.exit(0);
  });
}
