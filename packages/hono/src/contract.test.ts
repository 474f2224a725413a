import { createAdaptorServer } from "@hono/node-server";
import { defineContractSuite, listenOnFreePort, serviceTarget, sqliteTestStore } from "@channelkit/testkit";
import { Hono } from "hono";
import { channelkit } from "./index.js";

// The Hono app on @hono/node-server, the routes under a prefix.
defineContractSuite(
  serviceTarget({
    name: "hono on @hono/node-server (under /chat) + SQLite",
    store: sqliteTestStore,
    listen: async (service) => {
      const app = new Hono();
      app.get("/health", (c) => c.text("ok"));
      app.route("/chat", channelkit(service));
      const server = await listenOnFreePort(createAdaptorServer({ fetch: app.fetch }) as import("node:http").Server);
      return { ...server, url: `${server.url}/chat` };
    },
  }),
);
