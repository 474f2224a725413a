#!/usr/bin/env node
// `npm run bench`: bundles bench/src (TypeScript) with the esbuild the repository already has,
// then runs it. The @channelkit/* packages are bundled from their sources, as the tests use
// them, so the numbers are those of the working tree without a rebuild of dist/.
import { build } from "esbuild";
import { rmSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
// One directory per run, so that a second run never swaps the server code of a first one.
const outdir = fileURLToPath(new URL(`./.build/run-${process.pid}/`, import.meta.url));
process.on("exit", () => rmSync(outdir, { recursive: true, force: true }));
const pkg = (name, entry = "index") => `${root}packages/${name}/src/${entry}.ts`;

await build({
  entryPoints: ["run", "channelkit-server", "baseline-server", "lean-server", "floor-server"].map((name) => `${root}bench/src/${name}.ts`),
  outdir,
  outExtension: { ".js": ".mjs" },
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  sourcemap: "linked",
  logLevel: "warning",
  alias: {
    "@channelkit/core/adapter": pkg("core", "adapter"),
    "@channelkit/core/demo": pkg("core", "demo"),
    "@channelkit/core": pkg("core"),
    "@channelkit/kysely": pkg("kysely"),
    "@channelkit/node": pkg("node"),
  },
  // Dependencies stay where npm put them; only the channelkit sources are bundled.
  external: ["autocannon", "better-sqlite3", "jose", "kysely", "pg", "rate-limiter-flexible", "zod"],
});

await import(pathToFileURL(`${outdir}run.mjs`).href);
