import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sqlite } from "@channelkit/kysely";
import { defineContractSuite } from "@channelkit/testkit";
import { nodeTarget } from "./contract-target.js";

defineContractSuite(
  nodeTarget("node:http + SQLite", async () => {
    const dir = await mkdtemp(join(tmpdir(), "channelkit-contract-"));
    return { storage: sqlite(join(dir, "contract.db")), dispose: () => rm(dir, { recursive: true, force: true }) };
  }),
);
