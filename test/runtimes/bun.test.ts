import { join } from "node:path";
import { describeWithRuntime, ROOT, runtimeBinary } from "./binaries.js";
import { defineRuntimeSuites } from "./remote.js";

/*
 * The HTTP contract suite against `Bun.serve` running the service's Web handler, in a Bun
 * process on 127.0.0.1, on Bun's SQLite (`bunSqlite`) and on Postgres (`pg`). The server
 * (bun-server.ts) imports the built packages: `npm run build` first (`npm test` does).
 */
describeWithRuntime("Bun", runtimeBinary("bun"), (bun) => {
  defineRuntimeSuites("Bun.serve", bun, [join(ROOT, "test/runtimes/bun-server.ts")], "bun:sqlite");
});
