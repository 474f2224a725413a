import { defineContractSuite, describeWithPostgres, postgresTestStore, serviceTarget } from "@channelkit/testkit";
import { serve } from "./serve.js";

describeWithPostgres("Postgres", (serverUrl) => {
  defineContractSuite(
    serviceTarget({ name: "node:http + Postgres", store: () => postgresTestStore(serverUrl), listen: (service) => serve(service, { port: 0 }) }),
  );
});
