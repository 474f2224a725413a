import { postgres } from "@channelkit/kysely";
import { createTestDatabase, defineContractSuite, describeWithPostgres } from "@channelkit/testkit";
import { nodeTarget } from "./contract-target.js";

describeWithPostgres("Postgres", (serverUrl) => {
  defineContractSuite(
    nodeTarget("node:http + Postgres", async () => {
      const database = await createTestDatabase(serverUrl);
      return { storage: postgres(database.url), dispose: () => database.drop() };
    }),
  );
});
