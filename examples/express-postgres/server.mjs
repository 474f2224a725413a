// channelkit inside an Express 5 app, on Postgres.
//   CHANNELKIT_DB   postgres:// URL (default postgres://postgres@127.0.0.1:5432/channelkit),
//                   provisioned with the `channelkit` command
//   PORT, HOST      where to listen (default 3000 on 127.0.0.1)
import { createChannelService } from "@channelkit/core";
import { demoFlows } from "@channelkit/core/demo";
import { mountChannelkit } from "@channelkit/express";
import { openStorage } from "@channelkit/kysely";
import express from "express";

const storage = openStorage(process.env.CHANNELKIT_DB ?? "postgres://postgres@127.0.0.1:5432/channelkit");
await storage.migrate();
const service = await createChannelService({ storage, flows: demoFlows, secretKey: process.env.CHANNELKIT_SECRET_KEY });

const app = express();
// The host's own JSON parser, for its own routes.
app.use(express.json());
app.get("/health", (_req, res) => {
  res.json({ ok: true });
});
app.post("/notes", (req, res) => {
  res.status(201).json({ note: req.body });
});
// The channel routes at the root. mountChannelkit places them ahead of express.json(), which
// would otherwise consume the raw body that request signatures are checked over.
mountChannelkit(app, service);

const host = process.env.HOST ?? "127.0.0.1";
const server = app.listen(Number(process.env.PORT ?? 3000), host, () => {
  const shown = host.includes(":") ? `[${host}]` : host;
  console.log(`listening on http://${shown}:${server.address().port}`);
});

for (const signal of ["SIGINT", "SIGTERM"]) {
  process.once(signal, async () => {
    server.close();
    server.closeIdleConnections();
    await service.close(); // cancels runs in flight, so open streams end
    process.exit(0);
  });
}
