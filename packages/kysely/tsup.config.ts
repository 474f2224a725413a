import { defineConfig } from "tsup";
import { packageBuild } from "../../tsup.base.js";

// The runtimes' own SQLite drivers and D1 are entries of their own, so that the main entry's
// drivers (better-sqlite3, pg, loaded through node:module) stay out of a Worker's bundle.
export default defineConfig({ ...packageBuild, entry: ["src/index.ts", "src/bun-sqlite.ts", "src/node-sqlite.ts", "src/d1.ts"] });
