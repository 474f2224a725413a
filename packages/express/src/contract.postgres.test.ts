import { createServer } from "node:http";
import { defineContractSuite, describeWithPostgres, listenOnFreePort, postgresTestStore, serviceTarget } from "@channelkit/testkit";
import express from "express";
import { channelkit } from "./index.js";

describeWithPostgres("Postgres", (serverUrl) => {
  defineContractSuite(
    serviceTarget({
      name: "express (under /chat) + Postgres",
      store: () => postgresTestStore(serverUrl),
      listen: async (service) => {
        const app = express();
        app.use("/chat", channelkit(service));
        app.use(express.json());
        const server = await listenOnFreePort(createServer(app));
        return { ...server, url: `${server.url}/chat` };
      },
    }),
  );
});
