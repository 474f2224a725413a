import { defineContractSuite, serviceTarget, sqliteTestStore } from "@channelkit/testkit";
import { serve } from "./serve.js";

defineContractSuite(serviceTarget({ name: "node:http + SQLite", store: sqliteTestStore, listen: (service) => serve(service, { port: 0 }) }));
