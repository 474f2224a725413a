import { join } from "node:path";
import { describeWithRuntime, ROOT, runtimeBinary } from "./binaries.js";
import { defineRuntimeSuites } from "./remote.js";

/*
 * The HTTP contract suite against `Deno.serve` running the service's Web handler, in a Deno
 * process on 127.0.0.1, on Deno's `node:sqlite` (`nodeSqlite`) and on Postgres (`pg` from
 * node_modules). The server (deno-server.ts) imports the built packages through
 * node_modules: `npm run build` first (`npm test` does). `-A`: it reads the environment,
 * opens files and the network, and loads node_modules' `pg`.
 */
describeWithRuntime("Deno", runtimeBinary("deno"), (deno) => {
  defineRuntimeSuites("Deno.serve", deno, ["run", "-A", join(ROOT, "test/runtimes/deno-server.ts")], "node:sqlite");
});
