import { createServer } from "node:http";
import { defineContractSuite, listenOnFreePort, serviceTarget, sqliteTestStore } from "@channelkit/testkit";
import express from "express";
import { mountChannelkit } from "./index.js";

// A host with its own global JSON parser installed first: mountChannelkit must keep the raw
// bytes reaching the service (signatures, 413, 415) whatever the host installed.
defineContractSuite(
  serviceTarget({
    name: "express (mountChannelkit, behind express.json()) + SQLite",
    store: sqliteTestStore,
    listen: (service) => {
      const app = express();
      app.use(express.json());
      app.get("/health", (_req, res) => void res.send("ok"));
      mountChannelkit(app, service);
      return listenOnFreePort(createServer(app));
    },
  }),
);
