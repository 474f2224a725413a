import { defineContractSuite, serviceTarget, sqliteTestStore } from "@channelkit/testkit";
import Fastify from "fastify";
import { channelkit } from "./index.js";

// A default Fastify instance (its JSON and text parsers installed) with the plugin under a prefix.
defineContractSuite(
  serviceTarget({
    name: "fastify (under /chat) + SQLite",
    store: sqliteTestStore,
    listen: async (service) => {
      const app = Fastify();
      app.get("/health", async () => "ok");
      await app.register(channelkit, { service, prefix: "/chat" });
      const origin = await app.listen({ port: 0, host: "127.0.0.1" });
      return { url: `${origin}/chat`, close: () => app.close() };
    },
  }),
);
